"""Checks of user-supplied arguments, with errors that name the argument, the value and what was
expected.

A mistake in the arguments of a public constructor (a hook, SaveConfig, ReductionConfig, a
built-in rule) is raised where it is made, instead of failing steps later inside training.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from smdebug_lite.exceptions import SMDebugTypeError, SMDebugValueError
from smdebug_lite.modes import ALLOWED_MODE_NAMES, MODE_BY_VALUE, ModeKeys

_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


class ArgumentTypeError(SMDebugTypeError, SMDebugValueError):
    """An argument of the wrong type.

    Both a TypeError (what smdebug raised, or Python would, for most of these) and a ValueError
    (what these checks raised before they told the two apart), so existing handlers still match.
    """


def shown_value(value: Any) -> str:
    """repr() of a value, cut short: an error message must stay one readable line."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def type_error(argument: str, value: Any, expected: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{argument}={shown_value(value)} ({type(value).__name__}) is invalid: expected {expected}"
    )


def value_error(argument: str, value: Any, expected: str) -> SMDebugValueError:
    return SMDebugValueError(f"{argument}={shown_value(value)} is invalid: expected {expected}")


def check_path(argument: str, value: Any, *, allow_none: bool = False) -> str | None:
    """A local path or URI as a str: str and os.PathLike are accepted; empty text and NUL
    characters (which no file system or S3 key takes) are refused here, not at the first write."""
    if value is None and allow_none:
        return None
    expected = "a directory path or s3:// URI (str or os.PathLike)"
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise type_error(argument, value, expected)
    if not value.strip():
        raise value_error(argument, value, f"{expected}, not empty text")
    if "\0" in value:
        raise value_error(argument, value, f"{expected} without NUL characters")
    return value


def flag_truth(value: Any) -> bool | None:
    """What a bool-like value means, or None when it means neither: bool (numpy's too), an int
    (its truth), a float that is 0 or 1, or true/false/yes/no/on/off/1/0 text in any case. Text
    must be read, not tested for emptiness: "false" is not true. The one reading of flags;
    callers choose their errors."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ in ("bool", "bool_", "bool8") and hasattr(value, "item"):
        return bool(value.item())  # numpy's bool ("bool" since numpy 2)
    if isinstance(value, int):  # (smdebug took any number for its truth)
        return bool(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        # smdebug's JSON parsing compared flags with ``== True``/``== False``: 1.0 and 0.0 passed
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


def unwrap_flag_list(value: Any) -> Any:
    """``save_all=["true"]`` (as smdebug's own TF tests wrote it): a list or tuple of one flag
    stands for that flag, an empty one for False; any other value is returned as it is, for the
    caller's check to accept or refuse. The item is read, not the list's truth: ``["false"]``
    is False (smdebug took any non-empty list as True)."""
    if isinstance(value, (list, tuple)) and len(value) <= 1:
        return value[0] if value else False
    return value


def check_flag(argument: str, value: Any, default: bool = False, list_of_one: bool = False) -> bool:
    """A boolean as `flag_truth` reads it; None is the default. With `list_of_one`, also a list
    holding one flag (`unwrap_flag_list`); errors name the value as given."""
    if value is None:
        return default
    truth = flag_truth(unwrap_flag_list(value) if list_of_one else value)
    if truth is not None:
        return truth
    if isinstance(value, str):
        raise value_error(argument, value, "true or false")
    raise type_error(argument, value, "a bool, or a list holding one bool" if list_of_one
                     else "a bool")


def _flatten(argument: str, value: Any, expected: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise type_error(argument, value, expected)
    out: list[str] = []
    pending = [iter(value)]
    while pending:  # nested lists and tuples are flattened, as smdebug did (without recursion)
        item = next(pending[-1], _DONE)
        if item is _DONE:
            pending.pop()
        elif isinstance(item, str):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            if len(pending) > 32:
                raise value_error(argument, value, f"{expected}, nested at most 32 levels")
            pending.append(iter(item))
        else:
            raise type_error(argument, value, f"{expected}; it contains {shown_value(item)} "
                                              f"({type(item).__name__})")
    return out


_DONE = object()


def check_names(argument: str, value: Any, *, allow_none: bool = True) -> list[str] | None:
    """Collection names: one str, or an iterable (list, tuple, set; nested lists flattened) of
    non-empty strs. None stays None (the caller's default)."""
    if value is None and allow_none:
        return None
    expected = "a collection name (str) or a list of them"
    names = _flatten(argument, value, expected)
    for name in names:
        if not name.strip():
            raise value_error(argument, value, f"{expected}, without empty names")
    return names


def check_regexes(argument: str, value: Any) -> list[str] | None:
    """Regular expressions: one str or an iterable of strs, each compiled here so that a typo is
    reported at once."""
    if value is None:
        return None
    expected = "a regular expression (str) or a list of them"
    regexes = _flatten(argument, value, expected)
    for regex in regexes:
        try:
            re.compile(regex)
        except re.error as exc:
            raise value_error(argument, value, f"valid regular expressions ({regex!r}: {exc})"
                              ) from None
    return regexes


def check_choice(argument: str, value: Any, choices: Iterable[str]) -> str:
    """One of `choices`, in any case and with surrounding spaces ignored."""
    options = tuple(choices)
    expected = " or ".join(repr(c) for c in options)
    if not isinstance(value, str):
        raise type_error(argument, value, expected)
    text = value.strip().lower()
    if text not in options:
        raise value_error(argument, value, expected)
    return text


def check_instance(argument: str, value: Any, cls: type, expected: str) -> Any:
    """`value` itself when it is a `cls` (or None)."""
    if value is not None and not isinstance(value, cls):
        raise type_error(argument, value, expected)
    return value


def renamed(argument: str, value: Any, error: Exception) -> Exception:
    """`error` (from parsing `value`) restated so that it starts with the argument's name, with
    the same class so that handlers still match."""
    text = str(error)
    message = text if text.startswith(argument) else f"{argument}={shown_value(value)} is invalid: {text}"
    if isinstance(error, SMDebugTypeError):
        return ArgumentTypeError(message)
    if isinstance(error, SMDebugValueError):
        return SMDebugValueError(message)
    if isinstance(error, TypeError):
        return ArgumentTypeError(message)
    return SMDebugValueError(message)


__all__ = [
    "ArgumentTypeError",
    "check_choice",
    "check_flag",
    "check_instance",
    "check_names",
    "check_path",
    "check_regexes",
    "flag_truth",
    "renamed",
    "shown_value",
    "type_error",
    "unwrap_flag_list",
    "value_error",
]


def parse_mode(mode: object, argument: str = "mode") -> ModeKeys:
    """Accept a ModeKeys, its name (any case) or its int value; anything else is a ValueError."""
    if isinstance(mode, ModeKeys):
        return mode
    if isinstance(mode, str) and mode.strip().upper() in ALLOWED_MODE_NAMES:
        return ModeKeys[mode.strip().upper()]
    if isinstance(mode, int) and not isinstance(mode, bool) and mode in MODE_BY_VALUE:
        return MODE_BY_VALUE[mode]
    raise SMDebugValueError(
        f"{argument}={mode!r} is not a mode; expected one of {', '.join(ALLOWED_MODE_NAMES)}"
    )


def as_mode(mode: object) -> ModeKeys | None:
    """A ModeKeys from ours, from any enum with the same member names (e.g. smdebug's), a name
    or an int value. None stays None: as in smdebug, a mode under which nothing was saved (no
    steps, no tensors; a value lookup raises StepUnavailable)."""
    if mode.__class__ is ModeKeys or mode is None:
        return mode  # type: ignore[return-value]
    name = getattr(mode, "name", None)
    if isinstance(mode, Enum) and name in ALLOWED_MODE_NAMES:
        return ModeKeys[name]
    return parse_mode(mode)
