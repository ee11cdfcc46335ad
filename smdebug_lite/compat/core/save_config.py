"""``smdebug.core.save_config``: save schedules. The classes are smdebug_lite's own."""

from __future__ import annotations

from smdebug_lite.config.save_config import (
    DEFAULT_END_STEP,
    DEFAULT_SAVE_INTERVAL,
    DEFAULT_START_STEP,
    SAVE_CONFIG_MODE_KEYS,
    SaveConfig,
    SaveConfigMode,
)

DEFAULT_SAVE_CONFIG_INTERVAL = DEFAULT_SAVE_INTERVAL
DEFAULT_SAVE_CONFIG_START_STEP = DEFAULT_START_STEP
DEFAULT_SAVE_CONFIG_END_STEP = DEFAULT_END_STEP
DEFAULT_SAVE_CONFIG_SAVE_STEPS: list[int] = []
# The keys a SaveConfigMode's JSON form may hold.
ALLOWED_PARAMS = list(SAVE_CONFIG_MODE_KEYS)

__all__ = [
    "ALLOWED_PARAMS",
    "DEFAULT_SAVE_CONFIG_END_STEP",
    "DEFAULT_SAVE_CONFIG_INTERVAL",
    "DEFAULT_SAVE_CONFIG_SAVE_STEPS",
    "DEFAULT_SAVE_CONFIG_START_STEP",
    "SaveConfig",
    "SaveConfigMode",
]
