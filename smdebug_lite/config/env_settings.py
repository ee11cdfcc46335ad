"""Numeric and yes/no settings read from environment variables, all in one way.

A setting that is unset or blank takes its default without a word. One that cannot be used (not
a number, out of range, not a yes/no word) is named in ONE warning per process and value, with
the value found, what was expected and the default used instead, so a typo never changes
behaviour unnoticed. Where the caller asks (``strict=True``: analysis settings a user sets on
purpose), it raises `SMDebugValueError` instead. Whatever a hook reads, at any time up to and
including its close, only warns: training never stops over a setting.

This module logs through the standard library's logger of its own name (under the library's
root, so the library's handlers and credential filter see its records) rather than through
`smdebug_lite.log.logger`, which reads its own settings here.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import TypeVar

from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.log.redact import redacting_filter

# The spellings the library has always accepted; matched after strip() and lower().
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})

_T = TypeVar("_T", int, float, bool)
_log = logging.getLogger("smdebug_lite.config.env_settings")
_log.addFilter(redacting_filter())
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def env_int(name: str, default: int, *, minimum: int | None = None,
            maximum: int | None = None, strict: bool = False) -> int:
    """`name` as an integer (``int()`` spelling: no fraction), within [minimum, maximum] where
    given; else `default`, with a warning (or `SMDebugValueError` when `strict`)."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return _bad(name, raw, _expected("an integer", minimum, maximum, None), default, strict)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        return _bad(name, raw, _expected("an integer", minimum, maximum, None), default, strict)
    return value


def env_float(name: str, default: float, *, minimum: float | None = None,
              above: float | None = None, finite: bool = True, strict: bool = False) -> float:
    """`name` as a number (finite unless `finite=False`, never NaN), at least `minimum` /
    greater than `above` where given; else `default`, with a warning (or `SMDebugValueError`
    when `strict`)."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if (math.isnan(value) or (finite and math.isinf(value))
            or (minimum is not None and value < minimum)
            or (above is not None and not value > above)):
        kind = "a number" if finite else "a number (or inf)"
        return _bad(name, raw, _expected(kind, minimum, None, above), default, strict)
    return value


def env_bool(name: str, default: bool, *, strict: bool = False) -> bool:
    """`name` as yes/no: 1/true/yes/on or 0/false/no/off, any case; else `default`, with a
    warning (or `SMDebugValueError` when `strict`)."""
    raw = _raw(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return _bad(name, raw, "one of " + "/".join(sorted(TRUE_WORDS | FALSE_WORDS)), default,
                strict)


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or not raw.strip() else raw


def _expected(kind: str, minimum: float | None, maximum: float | None,
              above: float | None) -> str:
    noun = kind.split(" ", 1)[1]  # "a number" -> "number"
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f"a non-negative {noun}" if minimum == 0 else f"{kind} of at least {minimum:g}"
    if above is not None:
        return f"a positive {noun}" if above == 0 else f"{kind} greater than {above:g}"
    return kind


def _bad(name: str, raw: str, expected: str, default: _T, strict: bool) -> _T:
    if strict:
        raise SMDebugValueError(f"environment variable {name}={raw!r} must be {expected}")
    with _warned_lock:
        first = (name, raw) not in _warned
        _warned.add((name, raw))
    if first:
        shown = f"{default:g}" if isinstance(default, float) else default
        _log.warning("environment variable %s=%r must be %s; using the default %s", name, raw,
                     expected, shown)
    return default

