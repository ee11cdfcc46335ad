"""Parsing of rule parameters.

SageMaker hands every RuleParameter to a rule's constructor as a string, so each built-in rule
parses its own arguments. Python callers may pass real numbers/bools/lists too. Every failure is
a ``ValueError`` that names the rule, the parameter and the offending value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from smdebug_lite.config.reduction_config import parse_bool_flag

T = TypeVar("T")

_NONE_STRINGS = {"", "none", "null"}


def _fail(rule: str, name: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{rule}: parameter {name}={value!r} is not valid; expected {expected}")


def is_unset(value: Any) -> bool:
    """None, or a string SageMaker/JSON users write to mean "not given"."""
    return value is None or (isinstance(value, str) and value.strip().lower() in _NONE_STRINGS)


def parse_float(rule: str, name: str, value: Any, *, allow_none: bool = False,
                min_value: float | None = None, max_value: float | None = None) -> float | None:
    """A float (strings like "1e-7" accepted); NaN is refused, bounds are inclusive."""
    if is_unset(value):
        if allow_none:
            return None
        raise _fail(rule, name, value, "a number")
    if isinstance(value, bool):
        raise _fail(rule, name, value, "a number")
    try:
        out = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
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
    if isinstance(value, bool):
        raise _fail(rule, name, value, "an integer")
    try:
        if isinstance(value, str):
            text = value.strip()
            out_f = float(text)
            if not out_f.is_integer():
                raise ValueError
            out = int(out_f)
        else:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
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
    except ValueError:
        raise _fail(rule, name, value, "true or false") from None


def parse_str_list(rule: str, name: str, value: Any) -> list[str]:
    """A comma-separated string (or a list of strings); empty items are dropped."""
    if is_unset(value):
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable):
        items = list(value)
        if not all(isinstance(i, str) for i in items):
            raise _fail(rule, name, value, "a comma-separated string or a list of strings")
    else:
        raise _fail(rule, name, value, "a comma-separated string or a list of strings")
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
        raise _fail(rule, name, value, "a regular expression string")
    try:
        return re.compile(value.strip())
    except re.error as e:
        raise _fail(rule, name, value, f"a valid regular expression ({e})") from None


def parse_list(rule: str, name: str, value: Any, item: Callable[[str], T], expected: str) -> list[T]:
    """A comma-separated list whose items are converted by `item` (e.g. float)."""
    if is_unset(value):
        return []
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, Iterable):
        raise _fail(rule, name, value, expected)
    out = []
    for part in raw:
        text = part.strip() if isinstance(part, str) else part
        if text == "":
            continue
        try:
            out.append(item(text))
        except (TypeError, ValueError):
            raise _fail(rule, name, value, expected) from None
    return out
