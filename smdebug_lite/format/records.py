"""TFRecord framing: `u64 len | u32 masked_crc(len) | payload | u32 footer`, little-endian.

Event files under `events/` carry smdebug's constant footer (its reader rejects anything else);
TensorBoard files carry the real masked payload CRC. Readers here accept both.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from smdebug_lite.format.crc import SMDEBUG_MAGIC_FOOTER, masked_crc32c

HEADER_SIZE = 12
FOOTER_SIZE = 4
FRAMING_SIZE = HEADER_SIZE + FOOTER_SIZE
_LEN = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MAGIC_FOOTER_BYTES = _U32.pack(SMDEBUG_MAGIC_FOOTER)


class RecordError(ValueError):
    """A record's framing is broken (truncated file, bad length CRC, bad footer)."""


def record_header(payload_len: int) -> bytes:
    length = _LEN.pack(payload_len)
    return length + _U32.pack(masked_crc32c(length))


def footer(payload: bytes | None = None) -> bytes:
    """smdebug's magic footer, or the real masked CRC of `payload` (TensorBoard files)."""
    return _MAGIC_FOOTER_BYTES if payload is None else _U32.pack(masked_crc32c(payload))


def encode_record(payload: bytes, real_crc: bool = False) -> bytes:
    return record_header(len(payload)) + payload + footer(payload if real_crc else None)


def decode_record(buf: bytes | memoryview, offset: int = 0, check: bool = True) -> tuple[memoryview, int]:
    """Parse one record at `offset`; return (payload view, offset of the next record)."""
    view = memoryview(buf)
    if len(view) - offset < HEADER_SIZE:
        raise RecordError(f"truncated record header at byte {offset}")
    length_bytes = view[offset : offset + 8]
    (length,) = _LEN.unpack(length_bytes)
    if check:
        (len_crc,) = _U32.unpack(view[offset + 8 : offset + 12])
        if len_crc != masked_crc32c(length_bytes):
            raise RecordError(f"length CRC mismatch at byte {offset}")
    start = offset + HEADER_SIZE
    end = start + length
    if end + FOOTER_SIZE > len(view):
        raise RecordError(
            f"truncated record at byte {offset}: needs {length + FRAMING_SIZE} bytes, "
            f"{len(view) - offset} present"
        )
    payload = view[start:end]
    if check:
        (foot,) = _U32.unpack(view[end : end + FOOTER_SIZE])
        if foot != SMDEBUG_MAGIC_FOOTER and foot != masked_crc32c(payload):
            raise RecordError(f"payload CRC/footer mismatch at byte {offset}")
    return payload, end + FOOTER_SIZE


def iter_records(buf: bytes | memoryview, check: bool = True) -> Iterator[tuple[int, memoryview]]:
    """Yield (start offset, payload) for every record of a whole file's bytes."""
    offset = 0
    total = len(buf)
    while offset < total:
        payload, nxt = decode_record(buf, offset, check)
        yield offset, payload
        offset = nxt
