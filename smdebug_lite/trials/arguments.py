"""Checks of the arguments of Trial and Tensor queries, so a wrong type fails at once, naming
the argument, instead of deep inside a lookup (`'<' not supported between 'int' and 'str'`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.exceptions import SMDebugTypeError


def check_step(value: Any, argument: str = "step") -> int:
    """A step number: an int or a numpy integer (as smdebug accepted), returned as an int."""
    if value.__class__ is int:
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise SMDebugTypeError(
        f"{argument}={value!r} is not a step number; expected an int (or numpy integer), "
        f"got {type(value).__name__}")


def check_optional_step(value: Any, argument: str = "step") -> int | None:
    return None if value is None else check_step(value, argument)


def check_worker(value: Any) -> str | None:
    """A worker name as the trial lists it (`trial.workers()`), or None for any worker."""
    if value is None or value.__class__ is str:
        return value
    raise SMDebugTypeError(
        f"worker={value!r} is not a worker name; expected a str such as 'worker_0' "
        f"(see trial.workers()) or None, got {type(value).__name__}")


def check_name(value: Any, argument: str, expected: str) -> str:
    if value.__class__ is str or isinstance(value, str):
        return value
    raise SMDebugTypeError(
        f"{argument}={value!r} is not a name; expected a str ({expected}), "
        f"got {type(value).__name__}")
