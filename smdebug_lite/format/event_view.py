"""Views the tensor of one framed smdebug event record without protobuf.

Index files written by smdebug give only where each record is (start_idx, length), not where
its tensor bytes are. Decoding every record with protobuf cost more than reading it, so a
record is walked here instead, in the fixed order protobuf serializes smdebug's events in:

    Event:        1 wall_time (fixed64), 2 step (varint, absent when 0), 5 summary
    Summary:      1 value
    Value:        1 tag, 8 tensor, 9 metadata
    TensorProto:  1 dtype (absent when 0), 2 tensor_shape, 4 tensor_content

The tensor bytes are then viewed in place. Anything else (typed value lists, strings, bfloat16,
an unexpected field) returns None and the caller decodes with protobuf, which also explains
any damage. The TFRecord framing is verified first: the length CRC and the footer (smdebug's
constant, or the payload's masked CRC).
"""

from __future__ import annotations

import struct

import numpy as np

from smdebug_lite.format.crc import SMDEBUG_MAGIC_FOOTER, masked_crc32c
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.records import HEADER_SIZE
from smdebug_lite.format.tensor_codec import DT_BFLOAT16, PROTO_TO_NUMPY

# Valid 12-byte record headers seen so far -> payload length. Records of a tensor have the
# same length at every step, so the length CRC is computed once per distinct length.
_HEADERS: dict[bytes, int] = {}
# Serialized TensorShapeProto -> (shape, element count). smdebug names each dim after the
# tensor, so there is about one key per tensor and shape.
_SHAPES: dict[bytes, tuple[tuple[int, ...], int]] = {}
_DTYPES: dict[int, np.dtype] = {k: v for k, v in PROTO_TO_NUMPY.items() if k != DT_BFLOAT16}
_CACHE_MAX = 65536
# (tensor name, record length) -> the last such record walked in full: framing header, step
# varint start and end, tensor bytes offset (relative to the record), the bytes between the
# step varint and the tensor bytes, dtype, shape.
_TEMPLATES: dict[tuple[str, int], tuple] = {}
_MAGIC = struct.pack("<I", SMDEBUG_MAGIC_FOOTER)
_LEN = struct.Struct("<Q")


def _shape_of(key: bytes) -> tuple[tuple[int, ...], int] | None:
    try:
        msg = pb.TensorShapeProto.FromString(key)
    except Exception:  # noqa: BLE001 - damaged bytes: protobuf explains them later
        return None
    shape = tuple(int(d.size) for d in msg.dim)
    if any(d < 0 for d in shape):
        return None
    count = 1
    for d in shape:
        count *= d
    if len(_SHAPES) > _CACHE_MAX:
        _SHAPES.clear()
    _SHAPES[key] = out = (shape, count)
    return out


def view_event(data: bytes, base: int, length: int, tag: str | None = None) -> np.ndarray | None:
    """The tensor of the framed record data[base:base+length] as a read-only view of `data`,
    or None when the framing fails or the layout needs protobuf.

    `tag` (the tensor name the index gives) must be the record's tag (an entry pointing at
    another tensor's record views nothing), and lets a record be checked against the last
    record of that name and length walked in full: the same framing header (so the same
    verified length CRC), smdebug's footer, a step varint of the same width and the same bytes
    from there to the tensor bytes (the tag among them) mean the same layout, at a third of the
    cost of a walk."""
    if tag is not None:
        t = _TEMPLATES.get((tag, length))
        if t is not None:
            header, s0, s1, content, between, dtype, shape = t
            if (data[base : base + HEADER_SIZE] == header
                    and data[base + length - 4 : base + length] == _MAGIC
                    and data[base + s1 : base + content] == between
                    and (s0 == s1 or _step_varint_ok(data, base + s0, base + s1))):
                return np.ndarray(shape, dtype, data, base + content)
    found = locate(data, base, length, None if tag is None else tag.encode("utf-8"))
    if found is None:
        return None
    s0, s1, content, dtype, shape = found
    if tag is not None and data[base + length - 4 : base + length] == _MAGIC:
        if len(_TEMPLATES) > _CACHE_MAX:
            _TEMPLATES.clear()
        _TEMPLATES[(tag, length)] = (data[base : base + HEADER_SIZE], s0 - base, s1 - base,
                                     content - base, data[s1:content], dtype, shape)
    return np.ndarray(shape, dtype, data, content)


def _step_varint_ok(data: bytes, start: int, end: int) -> bool:
    """data[start:end] is a varint of exactly that width, after the Event.step field tag."""
    if data[start - 1] != 0x10 or data[end - 1] >= 0x80:
        return False
    for i in range(start, end - 1):
        if data[i] < 0x80:
            return False
    return True


Location = tuple[int, int, int, np.dtype, tuple[int, ...]]


def locate(data: bytes, base: int, length: int, tag: bytes | None = None) -> Location | None:
    """Where the framed record data[base:base+length] keeps its step varint (start, end; equal
    when the event has no step) and its tensor bytes (offset), with the tensor's dtype and
    shape; None when the framing fails, the layout needs protobuf, or the record's tag is not
    `tag` (when given: the name its index entry gives)."""
    end = base + length - 4
    if end > len(data) - 4 or length < 16:
        return None
    n = _HEADERS.get(data[base : base + HEADER_SIZE])
    if n is None:
        n = _check_header(data[base : base + HEADER_SIZE])
    if n + 16 != length:
        return None
    foot = data[end : end + 4]
    if foot != _MAGIC and int.from_bytes(foot, "little") != masked_crc32c(
            data[base + HEADER_SIZE : end]):
        return None
    d, p = data, base + HEADER_SIZE
    # Each length varint's one- and two-byte cases are read inline, field after field, instead
    # of through a helper: this walk runs once per record, and a call per field cost more than
    # the rest of it (`_varint_rest` takes the rare longer ones).
    try:
        # Event: wall_time, optional step.
        if d[p] != 0x09:
            return None
        p += 9
        step_start = p
        if d[p] == 0x10:
            p += 1
            step_start = p
            while d[p] & 0x80:
                p += 1
            p += 1
        step_end = p
        # Event.summary, then Summary.value: the tensor ends within both.
        if d[p] != 0x2A:
            return None
        n = d[p + 1]
        if n < 0x80:
            p += 2
        elif d[p + 2] < 0x80:
            n = (n & 0x7F) | (d[p + 2] << 7)
            p += 3
        else:
            n, p = _varint_rest(d, p + 2, n)
        if p + n > end:
            return None
        end = p + n
        if d[p] != 0x0A:
            return None
        n = d[p + 1]
        if n < 0x80:
            p += 2
        elif d[p + 2] < 0x80:
            n = (n & 0x7F) | (d[p + 2] << 7)
            p += 3
        else:
            n, p = _varint_rest(d, p + 2, n)
        if p + n > end:
            return None
        # Value.tag (compared with `tag` when given), then Value.tensor.
        if d[p] == 0x0A:
            n = d[p + 1]
            if n & 0x80:
                n, p = _varint_rest(d, p + 2, n)
            else:
                p += 2
            if tag is not None and d[p : p + n] != tag:
                return None
            p += n
        elif tag:
            return None
        if d[p] != 0x42:
            return None
        n = d[p + 1]
        if n < 0x80:
            p += 2
        elif d[p + 2] < 0x80:
            n = (n & 0x7F) | (d[p + 2] << 7)
            p += 3
        else:
            n, p = _varint_rest(d, p + 2, n)
        end = p + n
        if d[p] != 0x08:
            return None  # DT_INVALID: strings
        dt = _DTYPES.get(d[p + 1])
        if dt is None:
            return None
        p += 2
        if d[p] != 0x12:
            return None
        n = d[p + 1]
        if n < 0x80:
            p += 2
        elif d[p + 2] < 0x80:
            n = (n & 0x7F) | (d[p + 2] << 7)
            p += 3
        else:
            n, p = _varint_rest(d, p + 2, n)
        key = d[p : p + n]
        p += n
        found = _SHAPES.get(key)
        if found is None:
            found = _shape_of(key)
            if found is None:
                return None
        if p >= end or d[p] != 0x22:
            return None  # no tensor_content: typed value lists, decoded by protobuf
        n = d[p + 1]
        if n < 0x80:
            p += 2
        elif d[p + 2] < 0x80:
            n = (n & 0x7F) | (d[p + 2] << 7)
            p += 3
        else:
            n, p = _varint_rest(d, p + 2, n)
        if p + n != end or n != found[1] * dt.itemsize:
            return None
        return step_start, step_end, p, dt, found[0]
    except IndexError:  # a length pointing past the data
        return None


def _check_header(header: bytes) -> int:
    """The payload length of a record header, -1 when its length CRC does not match."""
    if masked_crc32c(header[:8]) != int.from_bytes(header[8:], "little"):
        return -1
    if len(_HEADERS) > _CACHE_MAX:
        _HEADERS.clear()
    (n,) = _LEN.unpack_from(header)
    _HEADERS[header] = n
    return n


def _varint_rest(d: bytes, p: int, first: int) -> tuple[int, int]:
    """Finish a varint whose first byte `first` (continuation bit set) is at p - 1."""
    value = first & 0x7F
    shift = 7
    while True:
        b = d[p]
        p += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, p
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")
