"""Checks of the arguments of Trial and Tensor queries, so a wrong type fails at once, naming
the argument, instead of deep inside a lookup (`'<' not supported between 'int' and 'str'`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.config.arguments import shown_value
from smdebug_lite.exceptions import SMDebugTypeError


def _not_a(argument: str, value: Any, what: str, expected: str) -> SMDebugTypeError:
    # A plain SMDebugTypeError, not config's ArgumentTypeError: that one is also a ValueError,
    # which a query's wrong type never was.
    return SMDebugTypeError(
        f"{argument}={shown_value(value)} is not {what}; expected {expected}, "
        f"got {type(value).__name__}")


def check_step(value: Any, argument: str = "step") -> int:
    """A step number: an int or a numpy integer (as smdebug accepted), returned as an int."""
    if value.__class__ is int:
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise _not_a(argument, value, "a step number", "an int (or numpy integer)")


def check_optional_step(value: Any, argument: str = "step") -> int | None:
    return None if value is None else check_step(value, argument)


def check_worker(value: Any) -> str | None:
    """A worker name as the trial lists it (`trial.workers()`), or None for any worker."""
    if value is None or value.__class__ is str:
        return value
    raise _not_a("worker", value, "a worker name",
                 "a str such as 'worker_0' (see trial.workers()) or None")


def check_name(value: Any, argument: str, expected: str) -> str:
    if value.__class__ is str or isinstance(value, str):
        return value
    raise _not_a(argument, value, "a name", f"a str ({expected})")
