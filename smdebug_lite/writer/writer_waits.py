"""Time training spent waiting for a writer that fell behind, and how that is reported."""

from __future__ import annotations

import time

from smdebug_lite.config.env_settings import env_int
from smdebug_lite.log.logger import get_logger

logger = get_logger(__name__)

# How many bytes of steps a writer may hold unwritten before `submit` waits (either writer).
DEFAULT_MAX_PENDING_BYTES = env_int("SMDEBUG_WRITER_MAX_PENDING_MB", 512) << 20


class WriterWaits:
    """Adds up the waits of one writer: a warning at most once a minute, a total at close."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.total_s = 0.0
        self._last_report = 0.0

    def add(self, waited: float, queued_bytes: int | None = None) -> None:
        self.total_s += waited
        now = time.monotonic()
        if waited > 0.05 and now - self._last_report > 60:
            self._last_report = now
            queued = "" if queued_bytes is None else f"{queued_bytes >> 20} MiB of "
            logger.warning(
                "The tensor writer fell behind: training waited %.2fs for %squeued tensors to be "
                "written (limit SMDEBUG_WRITER_MAX_PENDING_MB=%d). Saving fewer steps or tensors "
                "avoids this.", waited, queued, self.limit_bytes >> 20)

    def log_total(self) -> None:
        if self.total_s > 0:
            logger.info("Writer waits slowed training by %.2fs in total", self.total_s)
