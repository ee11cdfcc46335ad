"""``smdebug.core.logger``: smdebug's logging helpers over smdebug_lite's logger.

``get_logger()`` hands out loggers under smdebug_lite's root, configured once from the same
environment variables smdebug read (``SMDEBUG_LOG_LEVEL``, ``SMDEBUG_LOG_PATH``, ...), so one
setting controls both import paths. smdebug's name ``"smdebug"`` means that root; ``"smdebug.x"``
its child ``x``. As in smdebug, the root logger drops a message logged more than
``LOG_DUPLICATION_THRESHOLD`` times (``DuplicateLogFilter``); tests remove that filter by type.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict

from smdebug_lite.compat.core.config_constants import LOG_DUPLICATION_THRESHOLD
from smdebug_lite.log.logger import _LEVELS, _ROOT
from smdebug_lite.log.logger import get_logger as _lite_logger

_ALIAS = "smdebug"
_filter_installed = False


class MaxLevelFilter(logging.Filter):
    """Lets through records strictly below `level` (stdout takes what stderr does not)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


class DuplicateLogFilter:
    """Drops a message once it has been logged more than the threshold, so loops cannot flood
    the training log with the same line."""

    def __init__(self) -> None:
        self.msgs: defaultdict[object, int] = defaultdict(int)
        self.repeat_threshold = LOG_DUPLICATION_THRESHOLD

    def filter(self, record: logging.LogRecord) -> bool:
        self.msgs[record.msg] += 1
        return self.msgs[record.msg] <= self.repeat_threshold


def _get_log_level() -> int | None:
    """``SMDEBUG_LOG_LEVEL`` as a logging level; None for ``off``; unknown values mean info."""
    name = os.environ.get("SMDEBUG_LOG_LEVEL", "info").strip().lower()
    if name == "off":
        return None
    return _LEVELS.get(name, logging.INFO)


def _lite_name(name: str) -> str:
    if name in (_ALIAS, _ROOT, ""):
        return _ROOT
    if name.startswith(_ALIAS + "."):
        return _ROOT + name[len(_ALIAS) :]
    return name


def get_logger(name: str = _ALIAS) -> logging.Logger:
    """The smdebug_lite logger for `name` (smdebug's default: the library's root logger)."""
    global _filter_installed
    logger = _lite_logger(_lite_name(name))
    if not _filter_installed:
        _filter_installed = True
        _lite_logger(_ROOT).addFilter(DuplicateLogFilter())
    return logger


__all__ = ["DuplicateLogFilter", "MaxLevelFilter", "get_logger"]
