"""``smdebug.core.tfrecord.record_writer``: appends TFRecord-framed records to a file or object.

Framing is ``smdebug_lite.format.records``'s. Event files carry smdebug's constant footer
(the masked CRC of ``CHECKSUM_MAGIC_BYTES``) unless `write_checksum` asks for the payload's own
CRC, as TensorBoard files need.
"""

from __future__ import annotations

from collections.abc import Iterable

from smdebug_lite.compat.core.access_layer.file import TSAccessFile
from smdebug_lite.compat.core.access_layer.s3 import TSAccessS3
from smdebug_lite.compat.core.utils import is_s3
from smdebug_lite.exceptions import SMDebugError, SMDebugValueError
from smdebug_lite.format.crc import masked_crc32c
from smdebug_lite.format.records import encode_record

CHECKSUM_MAGIC_BYTES = b"0x12345678"


def u32(x: int) -> int:
    return x & 0xFFFFFFFF


class RecordWriter:
    """Records for one file (local: written as ``<path>.tmp``, renamed on close; S3: uploaded on
    close)."""

    def __init__(self, path: str, write_checksum: bool) -> None:
        self.write_checksum = write_checksum
        self.path = path
        on_s3, bucket, key = is_s3(path)
        try:
            if on_s3:
                self._writer: TSAccessFile | TSAccessS3 | None = TSAccessS3(str(bucket), str(key))
            else:
                self._writer = TSAccessFile(path, "wb")
        except OSError as err:
            raise SMDebugValueError(f"failed to open {path}: {err}") from err

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing can be reported from a finalizer
            pass

    def write_record(self, event_str: bytes) -> list[int]:
        """Frame and append one serialized event; returns [start offset, record length]."""
        return self.write_framed([encode_record(event_str, real_crc=self.write_checksum)])

    def write_framed(self, chunks: Iterable[bytes | memoryview]) -> list[int]:
        """Append one record already framed (e.g. by ``tensor_codec``), given in pieces."""
        if self._writer is None:
            raise SMDebugError(f"{self.path}: the record writer is closed")
        start = length = 0
        for i, chunk in enumerate(chunks):
            pos = self._writer.write(chunk)  # type: ignore[arg-type]
            if i == 0:
                start = pos[0]
            length += pos[1]
        return [start, length]

    def flush(self) -> None:
        if not self._writer:
            raise SMDebugError(f"{self.path}: the record writer is closed")
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self.flush()
            self._writer.close()
            self._writer = None


__all__ = ["CHECKSUM_MAGIC_BYTES", "RecordWriter", "masked_crc32c", "u32"]
