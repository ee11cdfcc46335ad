"""``smdebug.core.tfrecord.record_reader``: reads a whole event file's TFRecord records.

`check` decides what is verified, as in smdebug: ``"minimal"`` (the default) checks each length
CRC and smdebug's constant footer, ``"full"`` checks the length CRC and the payload's own CRC
(TensorBoard files), anything else checks nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from smdebug_lite.compat.core.access_layer.file import TSAccessFile
from smdebug_lite.compat.core.access_layer.s3 import TSAccessS3
from smdebug_lite.compat.core.tfrecord.record_writer import (
    CHECKSUM_MAGIC_BYTES,
    masked_crc32c,
    u32,
)
from smdebug_lite.compat.core.utils import is_s3
from smdebug_lite.exceptions import SMDebugError, SMDebugRuntimeError, SMDebugValueError
from smdebug_lite.format.crc import SMDEBUG_MAGIC_FOOTER

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")

__all__ = [
    "RecordReader",
    "check_length_crc",
    "check_payload_crc",
    "read_framed_record",
    "masked_crc32c",
    "u32",
    "CHECKSUM_MAGIC_BYTES",
]


def check_length_crc(length_bytes: bytes, saved_len_crc: int, check: object, where: str) -> None:
    """Raise SMDebugRuntimeError naming `where` when `check` asks for the length CRC and it is
    wrong (checked before the length is trusted)."""
    if check in ("minimal", "full"):
        computed = masked_crc32c(length_bytes)
        if saved_len_crc != computed:
            raise SMDebugRuntimeError(
                f"{where}: saved_len_crc: {saved_len_crc} is not equal to "
                f"computed_len_crc: {computed}"
            )


def check_payload_crc(payload: bytes, saved_payload_crc: int, check: object, where: str) -> None:
    """Raise SMDebugRuntimeError naming `where` when the footer is not what `check` expects."""
    if check not in ("minimal", "full"):
        return
    expected = masked_crc32c(payload) if check == "full" else SMDEBUG_MAGIC_FOOTER
    if saved_payload_crc != expected:
        raise SMDebugRuntimeError(
            f"{where}: saved_payload_crc: {saved_payload_crc} is not equal to "
            f"computed_payload_crc: {expected}"
        )


def read_framed_record(read: Callable[[int], bytes], check: object, where: str) -> bytes:
    """One TFRecord's payload taken from `read` (length, its CRC, payload, footer), checked as
    `check` asks; errors name `where`."""
    length_bytes = read(8)
    (length,) = _U64.unpack(length_bytes)
    (saved_len_crc,) = _U32.unpack(read(4))
    check_length_crc(length_bytes, saved_len_crc, check, where)
    payload = read(length)
    (saved_payload_crc,) = _U32.unpack(read(4))
    check_payload_crc(payload, saved_payload_crc, check, where)
    return payload


class RecordReader:
    """All records of one local file or S3 object, loaded at construction."""

    def __init__(self, path: str) -> None:
        self.path = path
        on_s3, bucket, key = is_s3(path)
        try:
            if on_s3:
                self._reader: TSAccessFile | TSAccessS3 | None = TSAccessS3(
                    str(bucket), str(key), create_bucket=False
                )
            else:
                self._reader = TSAccessFile(path, "rb")
            self._reader.ingest_all()
        except OSError as err:
            raise SMDebugValueError(f"failed to open {path}: {err}") from err
        except SMDebugError:
            raise
        except Exception as e:  # botocore errors: missing object or bucket, credentials
            raise SMDebugError(f"failed to open {path}: {e}") from e

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has_data(self) -> bool:
        return self._reader is not None and self._reader.has_data()

    def read_record(self, check: object = "minimal") -> bytes:
        """The next record's payload (a serialized Event)."""
        if self._reader is None:
            raise SMDebugError(f"{self.path}: the record reader is closed")
        return read_framed_record(self._reader.read, check, self.path)

    def flush(self) -> None:
        raise SMDebugError("flush() should not be called on RecordReader")

    def close(self) -> None:
        """Release the file. (An S3 accessor is only dropped: closing it would upload.)"""
        if self._reader is not None:
            if isinstance(self._reader, TSAccessFile):
                self._reader.close()
            self._reader = None
