"""Training modes: `ModeKeys` (TRAIN=1, EVAL=2, PREDICT=3, GLOBAL=4) and its constants.

The values are smdebug's and are written into event files. Parsing a mode from what users pass
(a name, a value, another library's enum) is an argument check: `config.arguments.parse_mode`.
It imports nothing of the package, so that every module, exceptions included, can name modes."""


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

__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "EVAL", "GLOBAL", "MODE_BY_VALUE", "ModeKeys",
           "PREDICT", "TRAIN"]
