"""``smdebug.core.access_layer.base``: the interface smdebug's file accessors share."""

from __future__ import annotations

from smdebug_lite.exceptions import SMDebugNotImplementedError
from smdebug_lite.logger import get_logger


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
