"""The hand-encoded tensor events are byte-identical to protobuf's and decode back exactly."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.records import decode_record
from smdebug_lite.format.tensor_codec import (
    decode_tensor_event,
    encode_tensor_record,
    narrow,
    to_storable,
)


def protobuf_reference(tag, arr, step, mode_value, mode_step, wall_time) -> bytes:
    st = to_storable(arr)
    e = pb.Event(wall_time=wall_time, step=step)
    v = e.summary.value.add()
    v.tag = tag
    t = v.tensor
    t.dtype = st.proto_dtype
    t.tensor_shape.SetInParent()
    for d in st.array.shape:
        t.tensor_shape.dim.add(size=d, name=f"{tag}_{d}")
    if st.is_string:
        for s in st.array.reshape(-1):
            t.string_val.append(str(s).encode())
    elif st.array.size:
        t.tensor_content = st.array.tobytes()
    v.metadata.plugin_data.add(plugin_name="mode_step", content=str(mode_step))
    v.metadata.plugin_data.add(plugin_name="mode", content=str(mode_value))
    return e.SerializeToString()


CASES = {
    "f32_scalar": np.array(1.5, dtype=np.float32),
    "f32_2d": np.arange(12, dtype=np.float32).reshape(3, 4),
    "f16": np.linspace(-2, 2, 7).astype(np.float16),
    "f64": np.array([np.pi, -np.e]),
    "i8": np.arange(-3, 4, dtype=np.int8),
    "i16": np.array([-32768, 0, 32767], dtype=np.int16),
    "i32": np.array([[-(2**31), 2**31 - 1]], dtype=np.int32),
    "i64": np.array([-(2**63), 2**63 - 1], dtype=np.int64),
    "u8": np.array([0, 255], dtype=np.uint8),
    "u16": np.array([0, 65535], dtype=np.uint16),
    "u32": np.array([0, 2**32 - 1], dtype=np.uint32),
    "u64_small": np.array([0, 2**63 - 1], dtype=np.uint64),
    "u64_big": np.array([0, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "c64": np.array([1 + 2j], dtype=np.complex64),
    "c128": np.array([1 - 2j], dtype=np.complex128),
    "strings": np.array(["a", "bc", "ünï"]),
    "empty": np.zeros((0, 3), dtype=np.float64),
    "big": np.random.default_rng(0).random((300, 300)).astype(np.float32),
    "big_endian": np.arange(4, dtype=">f4"),
    "non_contiguous": np.arange(16, dtype=np.float32).reshape(4, 4)[:, ::2],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bytes_match_protobuf_and_round_trip(name):
    arr = CASES[name]
    rec = encode_tensor_record("layer/w", arr, 7, 2, 3, 1234.25)
    blob = b"".join(bytes(c) for c in rec.chunks)
    assert len(blob) == rec.length
    payload, nxt = decode_record(blob)
    assert nxt == len(blob)
    assert bytes(payload) == protobuf_reference("layer/w", arr, 7, 2, 3, 1234.25)
    decoded = decode_tensor_event(payload)
    assert (decoded.tag, decoded.step, decoded.mode_value, decoded.mode_step) == ("layer/w", 7, 2, 3)
    out = narrow(decoded.value, rec.orig_dtype)
    assert out.dtype == arr.dtype.newbyteorder("=") or out.dtype.kind == arr.dtype.kind == "U"
    assert out.shape == arr.shape
    assert np.array_equal(out, arr)
    if rec.content_offset is not None and arr.size:
        fast = np.frombuffer(blob, dtype=rec.stored_dtype, count=arr.size,
                             offset=rec.content_offset).reshape(rec.shape)
        assert np.array_equal(narrow(fast, rec.orig_dtype), arr)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_low_precision_floats_come_back_as_float32_with_dtype_recorded(dtype):
    arr = np.array([1.0, -2.5, 0.125], dtype=getattr(ml_dtypes, dtype))
    rec = encode_tensor_record("w", arr, 0, 1, 0, 0.0)
    assert rec.orig_dtype == dtype
    payload, _ = decode_record(b"".join(bytes(c) for c in rec.chunks))
    out = narrow(decode_tensor_event(payload).value, rec.orig_dtype)
    assert out.dtype == np.float32
    assert np.array_equal(out, arr.astype(np.float32))


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
def test_sub_byte_integers_are_stored_widened_and_come_back_exactly(dtype):
    info = ml_dtypes.iinfo(getattr(ml_dtypes, dtype))
    arr = np.array([info.min, 0, info.max], dtype=getattr(ml_dtypes, dtype))
    rec = encode_tensor_record("q", arr, 0, 1, 0, 0.0)
    assert rec.orig_dtype == dtype
    payload, _ = decode_record(b"".join(bytes(c) for c in rec.chunks))
    stored = decode_tensor_event(payload).value
    assert stored.dtype == np.int32  # what smdebug's reader decodes
    out = narrow(stored, rec.orig_dtype)
    assert out.dtype == arr.dtype and np.array_equal(out, arr)


@pytest.mark.skipif(not hasattr(np.dtypes, "StringDType"), reason="numpy 2's StringDType")
def test_numpy_string_dtype_is_stored_as_strings():
    arr = np.array(["a", "bc"], dtype=np.dtypes.StringDType())
    rec = encode_tensor_record("s", arr, 0, 1, 0, 0.0)
    payload, _ = decode_record(b"".join(bytes(c) for c in rec.chunks))
    assert decode_tensor_event(payload).value.tolist() == ["a", "bc"]


def test_step_zero_is_omitted_like_protobuf():
    rec = encode_tensor_record("x", np.array([1.0], dtype=np.float32), 0, 4, 0, 0.5)
    payload, _ = decode_record(rec.chunks[0])
    assert bytes(payload) == protobuf_reference("x", np.array([1.0], dtype=np.float32), 0, 4, 0, 0.5)


def test_smdebug_documented_scalar_loss_layout():
    rec = encode_tensor_record("CrossEntropyLoss_output_0", np.array(2.0, dtype=np.float32), 1, 1, 1, 0.0)
    payload = bytes(decode_record(rec.chunks[0])[0])
    tensor_part = b"\x42\x0a\x08\x01\x12\x00\x22\x04" + np.float32(2.0).tobytes()
    assert tensor_part in payload
    assert payload.endswith(b"\x4a\x1b\x0a\x0e\x0a\x09mode_step\x12\x011\x0a\x09\x0a\x04mode\x12\x011")


def test_unsupported_dtype_is_a_clear_type_error():
    with pytest.raises(SMDebugTypeError, match="datetime64"):
        encode_tensor_record("x", np.array(["2020-01-01"], dtype="datetime64[D]"), 0, 1, 0, 0.0)
