"""CRC32C (Castagnoli) through the C-accelerated `crc32c` package, plus TFRecord's masking."""

from __future__ import annotations

import crc32c as _crc32c

_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C of `data`, continuing from `value` so large payloads can be hashed in pieces."""
    return _crc32c.crc32c(data, value)


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """TFRecord's masked CRC: rotate right by 15 and add a constant."""
    crc = _crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


# smdebug 1.0.x writes this constant instead of the payload CRC in events/ files and its reader
# insists on it: the masked CRC32C of the ASCII bytes b"0x12345678" (0x062DC0B3).
SMDEBUG_MAGIC_FOOTER = masked_crc32c(b"0x12345678")
assert SMDEBUG_MAGIC_FOOTER == 0x062DC0B3
