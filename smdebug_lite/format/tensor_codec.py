"""ndarray <-> serialized `Event` holding one tensor summary, exactly as smdebug lays it out.

Writing is hand-encoded: the bytes are identical to protobuf's serialization (a test checks
this), but building them directly lets a large tensor's memory go to the file without the two
extra copies protobuf would make, and costs a few microseconds for a small one. Reading uses the
generated protobuf classes, plus a fast path when the index says where the raw bytes are.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.format.crc import crc32c
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.records import HEADER_SIZE, footer, record_header

# TF DataType codes.
DT_INVALID, DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8 = 0, 1, 2, 3, 4, 5, 6
DT_STRING, DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16 = 7, 8, 9, 10, 14
DT_UINT16, DT_COMPLEX128, DT_HALF, DT_UINT32, DT_UINT64 = 17, 18, 19, 22, 23
DT_QINT8, DT_QUINT8, DT_QINT32, DT_QINT16, DT_QUINT16 = 11, 12, 13, 15, 16

# Dtypes smdebug 1.0.34's reader decodes correctly: written as they are.
_EXACT = {
    np.dtype(np.float16): DT_HALF,
    np.dtype(np.float32): DT_FLOAT,
    np.dtype(np.float64): DT_DOUBLE,
    np.dtype(np.int32): DT_INT32,
    np.dtype(np.int64): DT_INT64,
    np.dtype(np.uint8): DT_UINT8,
    np.dtype(np.bool_): DT_BOOL,
    np.dtype(np.complex128): DT_COMPLEX128,
}
# Dtypes smdebug cannot decode (KeyError) or decodes wrongly (INT8 as uint8): stored widened,
# losslessly, with the original dtype recorded in the index so our reader narrows back exactly.
_WIDENED = {
    np.dtype(np.int8): (DT_INT32, np.dtype(np.int32)),
    np.dtype(np.int16): (DT_INT32, np.dtype(np.int32)),
    np.dtype(np.uint16): (DT_INT32, np.dtype(np.int32)),
    np.dtype(np.uint32): (DT_INT64, np.dtype(np.int64)),
    np.dtype(np.complex64): (DT_COMPLEX128, np.dtype(np.complex128)),
}
# Low-precision float dtypes (ml_dtypes): stored as float32; readers return float32.
LOW_PRECISION_FLOATS = {
    np.dtype(getattr(ml_dtypes, n))
    for n in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float4_e2m1fn",
              "float6_e2m3fn", "float6_e3m2fn")
    if hasattr(ml_dtypes, n)
}

# Sub-byte integers (ml_dtypes): stored widened to int32 like int8, narrowed back on reading.
SUB_BYTE_INTS = {
    np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2")
    if hasattr(ml_dtypes, n)
}

PROTO_TO_NUMPY = {
    DT_FLOAT: np.dtype("<f4"),
    DT_DOUBLE: np.dtype("<f8"),
    DT_INT32: np.dtype("<i4"),
    DT_UINT8: np.dtype("u1"),
    DT_INT16: np.dtype("<i2"),
    DT_INT8: np.dtype("i1"),  # smdebug decodes this as uint8 (a bug); we do not
    DT_COMPLEX64: np.dtype("<c8"),
    DT_INT64: np.dtype("<i8"),
    DT_BOOL: np.dtype("?"),
    DT_BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DT_UINT16: np.dtype("<u2"),
    DT_COMPLEX128: np.dtype("<c16"),
    DT_HALF: np.dtype("<f2"),
    DT_UINT32: np.dtype("<u4"),
    DT_UINT64: np.dtype("<u8"),
    # TensorFlow's quantized types, as smdebug wrote numpy's one-field records of them (its own
    # reader could not decode these): read as the plain integers they store.
    DT_QINT8: np.dtype("i1"),
    DT_QUINT8: np.dtype("u1"),
    DT_QINT16: np.dtype("<i2"),
    DT_QUINT16: np.dtype("<u2"),
    DT_QINT32: np.dtype("<i4"),
}

# TensorFlow's numpy form of its quantized dtypes: one-field records (``[("qint8", "i1")]``,
# ``tf.qint8.as_numpy_dtype``) over a plain integer.
_QUANTIZED_FIELDS = {"qint8": "i1", "quint8": "u1", "qint16": "i2", "quint16": "u2", "qint32": "i4"}


def unwrap_quantized(arr: np.ndarray) -> np.ndarray:
    """A quantized-record array as a view of its plain integers (what ``EagerTensor.numpy()``
    returns for a quantized tensor); any other array unchanged. The values are the stored
    integers: TensorFlow keeps no scale with the tensor, so there is nothing else to save."""
    dt = arr.dtype
    if dt.names is None or len(dt.names) != 1 or dt.names[0] not in _QUANTIZED_FIELDS:
        return arr
    base = dt.fields[dt.names[0]][0]
    expected = _QUANTIZED_FIELDS[dt.names[0]]
    if f"{base.kind}{base.itemsize}" != expected or dt.itemsize != base.itemsize:
        return arr
    return arr.view(base)


_INLINE_LIMIT = 1 << 16  # below this, a record is joined into one bytes object
_DOUBLE = struct.Struct("<d")
_VARINT_CACHE = []


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint (negative ints as their 64-bit two's complement)."""
    if n < 16384 and _VARINT_CACHE:
        return _VARINT_CACHE[n]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_VARINT_CACHE.extend([varint(i) for i in range(16384)])


def _field(tag_byte: bytes, body: bytes) -> bytes:
    return tag_byte + varint(len(body)) + body


@dataclass(frozen=True, slots=True)
class StoredArray:
    """How an array is put on disk: the array actually written and what the index records."""

    array: np.ndarray
    proto_dtype: int
    orig_dtype: str | None  # logical dtype name when it differs from the stored one
    is_string: bool


def _contiguous(arr: np.ndarray, dtype=None) -> np.ndarray:
    if dtype is not None and arr.dtype != dtype:
        return arr.astype(dtype, order="C")
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def to_storable(value: np.ndarray) -> StoredArray:
    """Pick the on-disk dtype for an array; raise SMDebugTypeError naming unsupported dtypes."""
    arr = unwrap_quantized(value if isinstance(value, np.ndarray) else np.asarray(value))
    dt = arr.dtype
    if dt.kind in "USOT":  # (T: numpy's variable-width StringDType)
        return StoredArray(arr, DT_INVALID, None, True)
    if dt.byteorder == ">":
        arr = arr.astype(dt.newbyteorder("<"))
        dt = arr.dtype
    code = _EXACT.get(dt)  # np.ascontiguousarray would turn 0-d arrays into 1-d ones
    if code is not None:
        return StoredArray(_contiguous(arr), code, None, False)
    widened = _WIDENED.get(dt)
    if widened is not None:
        return StoredArray(_contiguous(arr, widened[1]), widened[0], dt.name, False)
    if dt in LOW_PRECISION_FLOATS:
        return StoredArray(_contiguous(arr, np.float32), DT_FLOAT, dt.name, False)
    if dt in SUB_BYTE_INTS:
        return StoredArray(_contiguous(arr, np.int32), DT_INT32, dt.name, False)
    if dt == np.dtype(np.uint64):
        if arr.size == 0 or int(arr.max()) <= np.iinfo(np.int64).max:
            return StoredArray(_contiguous(arr, np.int64), DT_INT64, "uint64", False)
        return StoredArray(_contiguous(arr), DT_UINT64, None, False)
    raise SMDebugTypeError(f"Numpy Datatype: {dt} is currently not supported")


@functools.lru_cache(maxsize=4096)
def _dims(tag: str, shape: tuple[int, ...]) -> bytes:
    """TensorShapeProto dims, named '<tag>_<size>' as smdebug names them (same every step)."""
    return b"".join(
        _field(b"\x12", (b"\x08" + varint(d) if d else b"") + _field(b"\x12", f"{tag}_{d}".encode()))
        for d in shape
    )


def tensor_head(tag: str, proto_dtype: int, shape: tuple[int, ...], nbytes: int) -> bytes:
    """The bytes a numeric record holds right before its tensor bytes: Value.tag, then the
    TensorProto's head (dtype, shape, length of `nbytes` tensor bytes). They depend on nothing
    else (not the step, time or mode), so a reader compares them with the record's to check
    that an index entry describes it (`format.entry_check`). `encode_tensor_record` writes the
    same bytes (a test holds the two together)."""
    tp_head = (b"\x08" + varint(proto_dtype) if proto_dtype else b"") + _field(
        b"\x12", _dims(tag, shape))
    if nbytes:
        tp_head += b"\x22" + varint(nbytes)
    tag_b = tag.encode("utf-8")
    return ((_field(b"\x0a", tag_b) if tag_b else b"") + b"\x42" + varint(len(tp_head) + nbytes)
            + tp_head)


@dataclass(frozen=True, slots=True)
class EncodedRecord:
    """One framed record ready to append to an event file, plus what its index entry needs."""

    chunks: tuple  # bytes / memoryview pieces, written in order
    length: int  # whole record, framing included
    crc: int  # CRC32C of the payload (the serialized Event)
    content_offset: int | None  # where the raw tensor bytes start, relative to the record
    stored_dtype: str | None  # numpy dtype string of those bytes
    shape: tuple[int, ...]
    orig_dtype: str | None


@functools.lru_cache(maxsize=256)
def _mode_metadata(mode_value: int, mode_step: int) -> bytes:
    pd_step = _field(b"\x0a", b"mode_step") + _field(b"\x12", str(mode_step).encode())
    pd_mode = _field(b"\x0a", b"mode") + _field(b"\x12", str(mode_value).encode())
    return _field(b"\x0a", pd_step) + _field(b"\x0a", pd_mode)


def encode_tensor_record(
    tag: str,
    value: np.ndarray,
    step: int,
    mode_value: int,
    mode_step: int,
    wall_time: float,
) -> EncodedRecord:
    """Frame one tensor as smdebug does (magic footer, mode plugin data, dims named tag_size)."""
    stored = to_storable(value)
    arr = stored.array
    tag_b = tag.encode("utf-8")
    shape = tuple(int(d) for d in arr.shape)
    dims = _dims(tag, shape)
    tp_head = (b"\x08" + varint(stored.proto_dtype) if stored.proto_dtype else b"") + _field(
        b"\x12", dims
    )
    if stored.is_string:
        flat = arr.reshape(-1)
        tp = tp_head + b"".join(
            _field(b"\x42", s if isinstance(s, bytes) else str(s).encode("utf-8")) for s in flat
        )
        content = b""
        tp_prefix_len = len(tp)
    else:
        content = memoryview(arr).cast("B") if arr.size else b""
        if len(content):
            tp_head += b"\x22" + varint(len(content))
        tp = tp_head
        tp_prefix_len = len(tp)
    tp_len = tp_prefix_len + len(content)
    metadata = _field(b"\x4a", _mode_metadata(mode_value, mode_step))
    value_head = (_field(b"\x0a", tag_b) if tag_b else b"") + b"\x42" + varint(tp_len)
    value_len = len(value_head) + tp_len + len(metadata)
    summary_head = b"\x0a" + varint(value_len)
    summary_len = len(summary_head) + value_len
    event_head = (
        b"\x09" + _DOUBLE.pack(wall_time)
        + (b"\x10" + varint(step) if step else b"")
        + b"\x2a" + varint(summary_len)
    )
    prefix = event_head + summary_head + value_head + tp
    payload_len = len(prefix) + len(content) + len(metadata)
    crc = crc32c(prefix)
    if len(content):
        crc = crc32c(content, crc)
    crc = crc32c(metadata, crc)
    header = record_header(payload_len)
    foot = footer()
    if len(content) and payload_len >= _INLINE_LIMIT:
        chunks: tuple = (header + prefix, content, metadata + foot)
    else:
        chunks = (b"".join((header, prefix, content, metadata, foot)),)
    numeric = not stored.is_string
    return EncodedRecord(
        chunks=chunks,
        length=HEADER_SIZE + payload_len + 4,
        crc=crc,
        content_offset=HEADER_SIZE + len(prefix) if numeric else None,
        stored_dtype=arr.dtype.str if numeric else None,
        shape=shape,
        orig_dtype=stored.orig_dtype,
    )


# ----------------------------------------------------------------------------------- reading


@dataclass(slots=True)
class DecodedTensor:
    tag: str
    step: int
    wall_time: float
    mode_value: int | None  # None when the event carries no mode plugin data
    mode_step: int | None
    value: np.ndarray


def narrow(arr: np.ndarray, orig_dtype: str | None) -> np.ndarray:
    """Undo the widening of `to_storable`; low-precision floats stay float32 by design."""
    if not orig_dtype or orig_dtype == arr.dtype.name:
        return arr
    if orig_dtype in _LOW_PRECISION_NAMES:
        return arr
    return arr.astype(np.dtype(orig_dtype))


_LOW_PRECISION_NAMES = {d.name for d in LOW_PRECISION_FLOATS}
# Stored dtype (`dtype.str`) -> the logical dtype names `to_storable` widens to it: an index
# entry's `orig_dtype` is one of these, or damaged.
WIDENED_FROM: dict[str, frozenset[str]] = {
    "<i4": frozenset([d.name for d, (_, to) in _WIDENED.items() if to == np.dtype(np.int32)]
                     + [d.name for d in SUB_BYTE_INTS]),
    "<i8": frozenset([d.name for d, (_, to) in _WIDENED.items() if to == np.dtype(np.int64)]
                     + ["uint64"]),
    "<c16": frozenset(d.name for d, (_, to) in _WIDENED.items()
                      if to == np.dtype(np.complex128)),
    "<f4": frozenset(_LOW_PRECISION_NAMES),
}


def array_from_tensor_proto(tp: pb.TensorProto) -> np.ndarray:
    """Decode every layout smdebug or TensorFlow writers produce."""
    shape = tuple(d.size for d in tp.tensor_shape.dim)
    if tp.dtype in (DT_INVALID, DT_STRING) and (tp.string_val or tp.dtype == DT_STRING):
        strings = [s.decode("utf-8", errors="replace") for s in tp.string_val]
        arr = np.array(strings, dtype=str)
        return arr.reshape(shape) if int(np.prod(shape)) == arr.size else arr
    dtype = PROTO_TO_NUMPY.get(tp.dtype)
    if dtype is None:
        raise SMDebugTypeError(f"tensor proto dtype {tp.dtype} is not supported")
    if tp.tensor_content:
        arr = np.frombuffer(tp.tensor_content, dtype=dtype).reshape(shape)
    else:
        arr = _from_typed_fields(tp, dtype, shape)
    if tp.dtype == DT_BFLOAT16:
        arr = arr.astype(np.float32)
    return arr


def _from_typed_fields(tp: pb.TensorProto, dtype: np.dtype, shape: tuple) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    for field in ("int_val", "int64_val", "float_val", "double_val", "bool_val"):
        vals = getattr(tp, field)
        if len(vals):
            arr = np.array(vals, dtype=dtype)
            if arr.size == 1 and size > 1:
                arr = np.full(size, arr[0], dtype=dtype)
            return arr.reshape(shape) if arr.size == size else arr
    if len(tp.half_val):
        arr = np.array(tp.half_val, dtype=np.uint16).view(np.float16)
        return arr.reshape(shape) if arr.size == size else arr
    return np.zeros(shape, dtype=dtype)


def decode_tensor_event(payload: bytes | memoryview) -> DecodedTensor:
    """Parse a serialized Event holding one tensor summary value (smdebug's layout)."""
    event = pb.Event.FromString(bytes(payload))
    if not event.HasField("summary") or not event.summary.value:
        raise ValueError("event holds no summary value")
    v = event.summary.value[0]
    mode_value = mode_step = None
    for pd in v.metadata.plugin_data:
        if pd.plugin_name == "mode_step":
            mode_step = int(pd.content)
        elif pd.plugin_name == "mode":
            mode_value = int(pd.content)
    if v.HasField("tensor"):
        arr = array_from_tensor_proto(v.tensor)
    elif v.HasField("simple_value"):
        arr = np.array(v.simple_value, dtype=np.float32)
    else:
        raise ValueError(f"summary value {v.tag!r} holds no tensor")
    return DecodedTensor(v.tag, event.step, event.wall_time, mode_value, mode_step, arr)
