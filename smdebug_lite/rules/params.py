"""Parsing of rule parameters.

SageMaker hands every RuleParameter to a rule's constructor as a string, so each built-in rule
parses its own arguments. Python callers may pass real numbers/bools/lists too. Every failure
names the rule, the parameter and the offending value: an unparseable value is a
``SMDebugValueError`` (a ValueError), a value of the wrong type an ``ArgumentTypeError`` (both a
TypeError, as smdebug's ``float(x)`` raised, and a SMDebugValueError).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from smdebug_lite.config.arguments import ArgumentTypeError, shown_value
from smdebug_lite.config.reduction_config import parse_bool_flag
from smdebug_lite.exceptions import SMDebugValueError

T = TypeVar("T")

_NONE_STRINGS = {"", "none", "null"}


def _fail(rule: str, name: str, value: Any, expected: str) -> SMDebugValueError:
    return SMDebugValueError(
        f"{rule}: parameter {name}={shown_value(value)} is not valid; expected {expected}"
    )


def _wrong_type(rule: str, name: str, value: Any, expected: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{rule}: parameter {name}={shown_value(value)} ({type(value).__name__}) is not valid; "
        f"expected {expected}"
    )


def _is_number(value: Any) -> bool:
    """Something float() should be tried on: a str or a real number (numpy's too), not a bool."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return True
    return type(value).__module__ == "numpy" and hasattr(value, "__float__") and not (
        type(value).__name__.startswith("bool"))


def is_unset(value: Any) -> bool:
    """None, or a string SageMaker/JSON users write to mean "not given"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in _NONE_STRINGS)


def check_plain(rule: str, name: str, value: Any) -> None:
    """Refuse what no rule parameter can be: anything but None, a str, a number or a bool, or a
    list/tuple/set of strs and numbers (Python callers' lists of names or values)."""
    if value is None or isinstance(value, str) or _is_number(value) or isinstance(value, bool):
        return
    expected = "a string or a number (or a list of them)"
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            if not (isinstance(item, (str, bool)) or _is_number(item)):
                raise _wrong_type(rule, name, value, f"{expected}; it contains {shown_value(item)}")
        return
    raise _wrong_type(rule, name, value, expected)


def parse_float(rule: str, name: str, value: Any, *, allow_none: bool = False,
                min_value: float | None = None, max_value: float | None = None) -> float | None:
    """A float (strings like "1e-7" accepted); NaN is refused, bounds are inclusive."""
    if is_unset(value):
        if allow_none:
            return None
        raise _fail(rule, name, value, "a number")
    if not _is_number(value):
        raise _wrong_type(rule, name, value, "a number (or a string holding one)")
    try:
        out = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise _fail(rule, name, value, "a number") from None
    if math.isnan(out):
        raise _fail(rule, name, value, "a number (not NaN)")
    if min_value is not None and out < min_value:
        raise _fail(rule, name, value, f"a number >= {min_value:g}")
    if max_value is not None and out > max_value:
        raise _fail(rule, name, value, f"a number <= {max_value:g}")
    return out


def parse_int(rule: str, name: str, value: Any, *, allow_none: bool = False,
              min_value: int | None = None) -> int | None:
    """An integer; "10", "10.0" and 10 are accepted, "10.5" is not."""
    if is_unset(value):
        if allow_none:
            return None
        raise _fail(rule, name, value, "an integer")
    if not _is_number(value):
        raise _wrong_type(rule, name, value, "an integer (or a string holding one)")
    try:
        if isinstance(value, str):
            text = value.strip()
            out_f = float(text)
            if not out_f.is_integer():
                raise ValueError
            out = int(out_f)
        else:
            if not isinstance(value, int) and not float(value).is_integer():
                raise ValueError  # (2.5, also as a numpy float)
            out = int(value)
    except (TypeError, ValueError, OverflowError):
        raise _fail(rule, name, value, "an integer") from None
    if min_value is not None and out < min_value:
        raise _fail(rule, name, value, f"an integer >= {min_value}")
    return out


def parse_bool(rule: str, name: str, value: Any) -> bool:
    """true/false in any case (also 1/0, yes/no); a real bool passes through."""
    try:
        return parse_bool_flag(value, name)
    except ArgumentTypeError:
        raise _wrong_type(rule, name, value, "true or false") from None
    except ValueError:
        raise _fail(rule, name, value, "true or false") from None


def parse_str_list(rule: str, name: str, value: Any) -> list[str]:
    """A comma-separated string (or a list of strings); empty items are dropped."""
    if is_unset(value):
        return []
    expected = "a comma-separated string or a list of strings"
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray, Mapping)):
        items = list(value)
        if not all(isinstance(i, str) for i in items):
            raise _wrong_type(rule, name, value, expected)
    else:
        raise _wrong_type(rule, name, value, expected)
    return [i.strip() for i in items if i.strip()]


def parse_regex_list(rule: str, name: str, value: Any) -> list[re.Pattern[str]]:
    """Comma-separated regexes, each compiled here so a typo fails at construction."""
    out = []
    for item in parse_str_list(rule, name, value):
        try:
            out.append(re.compile(item))
        except re.error as e:
            raise _fail(rule, name, value, f"valid regular expressions ({item!r}: {e})") from None
    return out


def parse_regex(rule: str, name: str, value: Any) -> re.Pattern[str] | None:
    """One regex (may contain commas or `|`); None when unset."""
    if is_unset(value):
        return None
    if not isinstance(value, str):
        raise _wrong_type(rule, name, value, "a regular expression string")
    try:
        return re.compile(value.strip())
    except re.error as e:
        raise _fail(rule, name, value, f"a valid regular expression ({e})") from None


def parse_list(rule: str, name: str, value: Any, item: Callable[[str], T], expected: str) -> list[T]:
    """A comma-separated list whose items are converted by `item` (e.g. float)."""
    if is_unset(value):
        return []
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, Iterable) or isinstance(raw, (bytes, bytearray, Mapping)):
        raise _wrong_type(rule, name, value, expected)
    out = []
    for part in raw:
        text = part.strip() if isinstance(part, str) else part
        if text == "":
            continue
        try:
            out.append(item(text))
        except (TypeError, ValueError, OverflowError):
            raise _fail(rule, name, value, expected) from None
    return out
