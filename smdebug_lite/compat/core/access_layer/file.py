"""``smdebug.core.access_layer.file``: a local file written under a temporary name.

Writers open ``<path>.tmp`` and rename it to ``<path>`` on ``close()``, so readers (ours and
smdebug's list ``*.json``/``*.tfevents`` only) never see a file half written. Readers load the
whole file once (``ingest_all``) and then take it apart with ``read(n)``.
"""

from __future__ import annotations

import os

from smdebug_lite.compat.core.paths import ensure_dir
from smdebug_lite.log.logger import get_logger

from .base import IngestedBytes, TSAccessBase

SMDEBUG_TEMP_PATH_SUFFIX = ".tmp"
WRITE_MODES = ["w", "w+", "wb", "wb+", "a", "a+", "ab", "ab+"]

logger = get_logger(__name__)


def get_temp_path(file_path: str) -> str:
    """Where a file is written before it is renamed into place."""
    return file_path + SMDEBUG_TEMP_PATH_SUFFIX


class TSAccessFile(IngestedBytes, TSAccessBase):
    """One local file, opened with a builtin ``open`` mode ('wb', 'a+', 'rb', ...)."""

    def __init__(self, path: str, mode: str) -> None:
        super().__init__()
        self.path = path
        self.mode = mode
        self._ingest(b"")
        ensure_dir(path)
        if mode in WRITE_MODES:
            self.temp_path = get_temp_path(path)
            self.open(self.temp_path, mode)
        else:
            self.open(path, mode)

    def open(self, path: str, mode: str) -> None:  # type: ignore[override]
        self._accessor = open(path, mode)  # noqa: SIM115 - closed by close()

    def write(self, _str: bytes | str) -> list[int]:
        """Append; returns [start offset, length] of what was written (an index entry's fields)."""
        start = self._accessor.tell()
        self._accessor.write(_str)
        return [start, len(_str)]

    def flush(self) -> None:
        self._accessor.flush()

    def close(self) -> None:
        """Close, and for a written file move it from its temporary name to its own."""
        self._accessor.close()
        if self.mode in WRITE_MODES:
            if not os.path.exists(self.temp_path):
                logger.info("Skipping close of %s: the file no longer exists", self.temp_path)
                return
            os.replace(self.temp_path, self.path)

    def ingest_all(self) -> None:
        self._ingest(self._accessor.read())

    def _where(self) -> str:
        return self.path
