"""Training modes: the enum (from `mode_keys`) and parsing a mode from what users pass."""

from __future__ import annotations

from enum import Enum

from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.mode_keys import (
    ALLOWED_MODE_NAMES,
    ALLOWED_MODES,
    EVAL,
    GLOBAL,
    MODE_BY_VALUE,
    PREDICT,
    TRAIN,
    ModeKeys,
)

__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "EVAL", "GLOBAL", "MODE_BY_VALUE", "ModeKeys",
           "PREDICT", "TRAIN", "as_mode", "parse_mode"]


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
