"""Training modes. Values are smdebug's: they are written into event files."""

from __future__ import annotations

from enum import Enum


class ModeKeys(Enum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    # Members are singletons compared by identity: hashing by identity keeps every dict lookup
    # keyed by a mode (step counters, schedules) in C instead of Enum's Python-level __hash__.
    __hash__ = object.__hash__


TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL

ALLOWED_MODES = (TRAIN, EVAL, PREDICT, GLOBAL)
ALLOWED_MODE_NAMES = tuple(m.name for m in ALLOWED_MODES)
MODE_BY_VALUE = {m.value: m for m in ALLOWED_MODES}


def parse_mode(mode: object, argument: str = "mode") -> ModeKeys:
    """Accept a ModeKeys, its name (any case) or its int value; anything else is a ValueError."""
    from smdebug_lite.exceptions import SMDebugValueError

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
