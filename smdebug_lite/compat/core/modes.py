"""``smdebug.core.modes``: the training modes, as smdebug's semi-internal module named them.

``ModeKeys`` is smdebug_lite's own enum (the same object), so modes from either import path
compare equal and key the same dicts.
"""

from __future__ import annotations

from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.modes import ModeKeys

# smdebug exposed lists here (callers may concatenate them); smdebug_lite.modes keeps tuples.
ALLOWED_MODES = [ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL]
ALLOWED_MODE_NAMES = [m.name for m in ALLOWED_MODES]
# Names of the event-file summary metadata plugins that carry a record's mode and mode step.
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"

_BY_LOWER_NAME = {m.name.lower(): m for m in ALLOWED_MODES}


def str_to_mode_keys(mode_str: str) -> ModeKeys:
    """``"train"`` -> ``ModeKeys.TRAIN``; only the lower-case names, as smdebug accepted."""
    mode = _BY_LOWER_NAME.get(mode_str) if isinstance(mode_str, str) else None
    if mode is None:
        raise SMDebugValueError(
            f"mode={mode_str!r} is not a mode; expected one of {', '.join(_BY_LOWER_NAME)}"
        )
    return mode


__all__ = [
    "ALLOWED_MODES",
    "ALLOWED_MODE_NAMES",
    "MODE_PLUGIN_NAME",
    "MODE_STEP_PLUGIN_NAME",
    "ModeKeys",
    "str_to_mode_keys",
]
