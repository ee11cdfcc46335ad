"""The rule action ``stopsignal``: write the local stop signal (`smdebug_lite.storage.stop_signal`)
into the training's out_dir, which its hook polls for.
"""

from __future__ import annotations

from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage.stop_signal import (
    STOP_SIGNAL_FILE,
    StopSignalPoller,
    clear_stop_signal,
    read_stop_signal,
    stop_requested,
    stop_signal_path,
    write_stop_signal,
)

logger = get_logger(__name__)


class StopSignalAction:
    """Action ``{"name": "stopsignal", "path": <out_dir>}``; path defaults to the base trial's."""

    name = "stopsignal"

    def __init__(self, rule_name: str, out_dir: str) -> None:
        self.rule_name = rule_name
        self.out_dir = out_dir
        self.written: str | None = None

    def invoke(self, message: str = "") -> None:
        try:
            self.written = write_stop_signal(self.out_dir, self.rule_name, message)
            logger.info("Rule %s wrote a stop signal to %s", self.rule_name, self.written)
        except Exception as e:
            logger.error("Rule %s could not write a stop signal under %s: %s",
                         self.rule_name, self.out_dir, e)


__all__ = [
    "STOP_SIGNAL_FILE",
    "StopSignalAction",
    "StopSignalPoller",
    "clear_stop_signal",
    "read_stop_signal",
    "stop_requested",
    "stop_signal_path",
    "write_stop_signal",
]
