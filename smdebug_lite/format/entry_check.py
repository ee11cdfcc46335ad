"""An index entry checked against the record it points at, before its fields are trusted.

smdebug-lite's index entries say what a record's tensor bytes are and where (`dtype`, `shape`,
`content_offset`), and readers view those bytes in place, with no parse. The entry's CRC32C
proves the record intact, not that the entry describes it: a damaged shape, dtype, offset or
name would view the wrong bytes (a shape `[4, 16]` flipped to `[4, 36]` viewed 80 values past
the tensor). The bytes a record holds right before its tensor bytes (its tag, then the
tensor's dtype, dims and byte count: `tensor_codec.tensor_head`) follow from the entry's name,
stored dtype and shape alone, so one comparison with the bytes that end at `content_offset`
checks every field at once: the name is the record's tag, the element count times the item
size is the byte count the record gives, the offset is where those bytes start, and they end
inside the record. The expected bytes are cached per (name, dtype, shape): every step of a
tensor shares them.

Records in smdebug's layout (entries without offsets) are walked to their tensor bytes, their
tag compared on the way (`event_view`). An entry that fails here goes to the general path
(`entry_record.decode_entry_record`), which says what differs (`entry_mismatch`), or decodes
with protobuf a record that agrees with the entry but was laid out by another encoder.
"""

from __future__ import annotations

import math

from crc32c import crc32c as _crc

from smdebug_lite.format.crc import masked_crc32c
from smdebug_lite.format.event_view import locate
from smdebug_lite.format.records import FOOTER_SIZE, HEADER_SIZE, decode_record
from smdebug_lite.format.step_index import Entry, entry_shape, shape_tuple
from smdebug_lite.format.tensor_codec import (
    DT_BFLOAT16,
    PROTO_TO_NUMPY,
    decode_tensor_event,
    tensor_head,
)

# (tensor name, stored dtype name, shape as the entry gives it) -> (head bytes, tensor bytes).
HEADS: dict[tuple[object, object, object], tuple[bytes, int]] = {}
_HEADS_MAX = 65536
# The proto dtype of the bytes an entry's dtype names (plain types before quantized ones).
_PROTO: dict[str, int] = {}
for _code, _dt in PROTO_TO_NUMPY.items():
    if _code != DT_BFLOAT16:
        _PROTO.setdefault(_dt.str, _code)


def expected_head(name: str, dtype: str, shape: object) -> tuple[bytes, int]:
    """(the bytes right before the tensor bytes, the number of tensor bytes) of a record of
    tensor `name` holding `dtype` values of `shape` (a tuple, or the entry's text of it).
    ValueError / TypeError for a dtype, shape or name no numeric record has."""
    key = (name, dtype, shape)
    found = HEADS.get(key)
    if found is not None:
        return found
    code = _PROTO.get(dtype)
    if code is None or name.__class__ is not str:
        raise ValueError(f"no raw record holds dtype {dtype!r} under name {name!r}")
    dims = shape_tuple(shape)
    nbytes = math.prod(dims) * PROTO_TO_NUMPY[code].itemsize
    found = (tensor_head(name, code, dims, nbytes), nbytes)
    if len(HEADS) >= _HEADS_MAX:
        HEADS.clear()
    HEADS[key] = found
    return found


def head_agrees(data: bytes, start: int, length: int, offset: int, head: bytes,
                nbytes: int) -> bool:
    """Whether the record at byte `start` of `data` (`length` bytes, framing included) holds
    `head` right before its byte `offset`, and room for `nbytes` tensor bytes from there."""
    at = start + offset - len(head)
    return (at >= start + HEADER_SIZE and offset + nbytes <= length - FOOTER_SIZE
            and data[at : start + offset] == head)


def entry_agrees(data: bytes, base: int, entry: Entry) -> bool:
    """`head_agrees` for an entry that gives dtype, shape and content_offset (False for one
    whose fields cannot describe a record)."""
    try:
        head, nbytes = expected_head(entry["tensorname"], entry["dtype"], entry["shape"])
        return head_agrees(data, base, entry["length"], entry["content_offset"], head, nbytes)
    except (KeyError, TypeError, ValueError):
        return False


def entry_mismatch(data: bytes, base: int, entry: Entry) -> str | None:
    """What in the entry differs from the record at `base` (whose framing and CRC passed): its
    tag, dtype, shape or tensor bytes' offset. None when the record agrees with the entry, or
    cannot be decoded (then the record's own damage is reported). Slow: for explaining."""
    name = entry.get("tensorname")
    what = f"the entry of tensor {name!r}"
    start = entry.get("start_idx")
    try:
        payload, _ = decode_record(data, base)
        found = decode_tensor_event(payload)
    except Exception:  # noqa: BLE001 - the record's own damage, reported by its decoder
        return None
    if found.tag != name:
        return f"{what} points at the record of tensor {found.tag!r} (byte {start})"
    value = found.value
    dtype = entry.get("dtype")
    if dtype is not None and value.dtype.str != dtype:
        return f"{what} has dtype={dtype!r}; its record holds {value.dtype.str!r} values"
    try:
        shape = entry_shape(entry)
    except ValueError as e:
        return f"{what}: {e}"
    if shape is not None and shape != value.shape:
        return f"{what} has shape={list(shape)}; its record holds shape {list(value.shape)}"
    offset = entry.get("content_offset")
    if offset is not None:
        located = locate(data, base, entry["length"])
        if located is not None and located[2] - base != offset:
            return (f"{what} has content_offset={offset}; its record's tensor bytes start at "
                    f"byte {located[2] - base}")
    return None


def length_mismatch(data: bytes, base: int, entry: Entry) -> str | None:
    """For a record whose CRC32C failed: the entry's `length` when it is what is wrong (the
    record framed at `base` is intact at another length), else None."""
    header = data[base : base + HEADER_SIZE]
    crc = entry.get("crc32c")
    if len(header) < HEADER_SIZE or crc.__class__ is not int:
        return None
    if masked_crc32c(header[:8]) != int.from_bytes(header[8:], "little"):
        return None
    n = int.from_bytes(header[:8], "little")
    length = entry.get("length")
    if n + HEADER_SIZE + FOOTER_SIZE == length or base + HEADER_SIZE + n > len(data):
        return None
    if _crc(data[base + HEADER_SIZE : base + HEADER_SIZE + n]) != crc:
        return None
    return (f"the entry of tensor {entry.get('tensorname')!r} has length={length}; its record "
            f"at byte {entry.get('start_idx')} is {n + HEADER_SIZE + FOOTER_SIZE} bytes long")

