"""Refresh control for trials, and small argument parsers used by rules.

`no_refresh` / `refresh` set `dynamic_refresh` on one trial or a list of trials and put back
each trial's *previous* value on exit, so they nest (smdebug always restored the opposite value).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from smdebug_lite.config.arguments import flag_truth

_NUMERIC_SUFFIX = re.compile(r".+_(\d+)$")


def _as_list(trials: Any) -> list[Any]:
    if isinstance(trials, (list, tuple, set, frozenset)):
        return list(trials)
    return [trials]


@contextmanager
def _dynamic_refresh(trials: Any, value: bool) -> Iterator[Any]:
    items = _as_list(trials)
    previous = [t.dynamic_refresh for t in items]
    for t in items:
        t.dynamic_refresh = value
    try:
        yield trials
    finally:
        for t, old in zip(items, previous, strict=True):
            t.dynamic_refresh = old


def no_refresh(trials: Any):
    """Within the block, queries use only what the trial(s) already loaded."""
    return _dynamic_refresh(trials, False)


def refresh(trials: Any):
    """Within the block, queries load new data as it appears."""
    return _dynamic_refresh(trials, True)


def _tensor_name_sorter(t_name: str) -> int:
    """Sort key: the numeric suffix of names like 'relu_input_2' (0 when there is none)."""
    m = _NUMERIC_SUFFIX.match(t_name)
    return int(m.group(1)) if m else 0


def parse_bool(arg: Any, default: bool) -> bool:
    """A bool from a bool, 0 or 1 (1.0 and 0.0 too), or a bool-like string in any case ('TRUE'
    too); None gives default. Anything else is a ValueError (smdebug accepted these numbers too,
    as equal to the bools)."""
    if arg is None:
        return default
    readable = isinstance(arg, (bool, str)) or (isinstance(arg, (int, float)) and arg in (0, 1))
    truth = flag_truth(arg) if readable else None
    if truth is None:
        raise ValueError(f"boolean argument expected, but found {arg!r}")
    return truth


def parse_list_from_str(arg: str | Iterable[str] | None, delimiter: str = ",") -> list[str]:
    """A list from a delimited string (items stripped, empty ones dropped) or a list."""
    if arg is None:
        return []
    if isinstance(arg, str):
        return [s.strip() for s in arg.split(delimiter) if s.strip()]
    return list(arg)
