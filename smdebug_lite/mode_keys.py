"""The training-mode enum, alone at the bottom of the package so that exceptions can name modes.

Values are smdebug's: they are written into event files. `smdebug_lite.modes` adds parsing."""

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
