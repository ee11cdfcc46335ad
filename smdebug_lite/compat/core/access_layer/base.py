"""``smdebug.core.access_layer.base``: the interface smdebug's file accessors share."""

from __future__ import annotations

from smdebug_lite.exceptions import SMDebugError, SMDebugNotImplementedError
from smdebug_lite.log.logger import get_logger


class TSAccessBase:
    """What a local file or an S3 object accessor offers; subclasses fill in what they support."""

    def __init__(self) -> None:
        self.logger = get_logger(__name__)

    def open(self, *args: object) -> None:
        raise SMDebugNotImplementedError(f"{type(self).__name__}.open is not supported")

    def write(self, _bytes: bytes | str) -> list[int]:
        raise SMDebugNotImplementedError(f"{type(self).__name__}.write is not supported")

    def flush(self) -> None:
        raise SMDebugNotImplementedError(f"{type(self).__name__}.flush is not supported")

    def close(self) -> None:
        raise SMDebugNotImplementedError(f"{type(self).__name__}.close is not supported")

    def has_data(self) -> bool:
        raise SMDebugNotImplementedError(f"{type(self).__name__}.has_data is not supported")


class IngestedBytes:
    """``read(n)``/``has_data()`` over a file or object loaded whole by ``ingest_all()``: both
    accessors take records apart the same way, only where the bytes came from differs."""

    _data: bytes
    _datalen: int
    _position: int

    def _ingest(self, data: bytes) -> None:
        self._data = data
        self._datalen = len(data)
        self._position = 0

    def _where(self) -> str:
        raise NotImplementedError

    def read(self, n: int) -> bytes:
        if self._position + n > self._datalen:
            raise SMDebugError(
                f"{self._where()}: reading {n} bytes at offset {self._position} goes past the "
                f"end ({self._datalen} bytes)"
            )
        res = self._data[self._position : self._position + n]
        self._position += n
        return res

    def has_data(self) -> bool:
        return self._position < self._datalen
