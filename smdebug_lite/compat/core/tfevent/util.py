"""``smdebug.core.tfevent.util``: numpy arrays to TensorProto, smdebug's way.

``FileWriter`` does not go through here (it uses ``tensor_codec``'s encoder, which writes the
same bytes faster); this is for code that builds its own summaries.
"""

from __future__ import annotations

import numpy as np

from smdebug_lite.compat.core.utils import make_numpy_array
from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.tensor_codec import LOW_PRECISION_FLOATS, SUB_BYTE_INTS

TensorProto = pb.TensorProto
TensorShapeProto = pb.TensorShapeProto

_NP_DATATYPE_TO_PROTO_DATATYPE = {
    np.dtype(np.float16): "DT_HALF",
    np.dtype(np.float32): "DT_FLOAT",
    np.dtype(np.float64): "DT_DOUBLE",
    np.dtype(np.int32): "DT_INT32",
    np.dtype(np.int64): "DT_INT64",
    np.dtype(np.uint8): "DT_UINT8",
    np.dtype(np.uint16): "DT_UINT16",
    np.dtype(np.uint32): "DT_UINT32",
    np.dtype(np.uint64): "DT_UINT64",
    np.dtype(np.int8): "DT_INT8",
    np.dtype(np.int16): "DT_INT16",
    np.dtype(np.complex64): "DT_COMPLEX64",
    np.dtype(np.complex128): "DT_COMPLEX128",
    np.dtype(bool): "DT_BOOL",
    # TensorFlow's quantized numpy records, with the codes smdebug gave them (quint16 and qint32
    # as their plain integer types). smdebug-lite's reader decodes all five as plain integers.
    np.dtype([("qint8", "i1")]): "DT_QINT8",
    np.dtype([("quint8", "u1")]): "DT_QUINT8",
    np.dtype([("qint16", "<i2")]): "DT_QINT16",
    np.dtype([("quint16", "<u2")]): "DT_UINT16",
    np.dtype([("qint32", "<i4")]): "DT_INT32",
}


def _stored_as(npdtype: np.dtype) -> np.dtype | None:
    """The dtype an array of `npdtype` is written as when TensorFlow's own type for it (float8,
    int4, ... newer than smdebug) is one smdebug's readers cannot decode: float32 for
    low-precision floats, int32 for sub-byte integers, as smdebug-lite's writer stores them."""
    if npdtype in LOW_PRECISION_FLOATS:
        return np.dtype(np.float32)
    if npdtype in SUB_BYTE_INTS:
        return np.dtype(np.int32)
    return None


def _get_proto_dtype(npdtype: np.dtype) -> tuple[bool, str]:
    """(is numeric, TF dtype name); strings and objects are DT_STRING."""
    if getattr(npdtype, "kind", None) in ("U", "O", "S", "T"):
        return False, "DT_STRING"
    try:
        npdtype = np.dtype(npdtype)
        return True, _NP_DATATYPE_TO_PROTO_DATATYPE[_stored_as(npdtype) or npdtype]
    except (KeyError, TypeError):
        raise SMDebugTypeError(
            f"Numpy Datatype: {np.dtype(npdtype)} is currently not supported"
        ) from None


def make_tensor_proto(nparray_data: np.ndarray, tag: str) -> pb.TensorProto:
    """A TensorProto with dims named ``<tag>_<size>`` and the raw bytes (or UTF-8 strings)."""
    is_numeric, dtype = _get_proto_dtype(nparray_data.dtype)
    dims = [pb.TensorShapeProto.Dim(size=d, name=f"{tag}_{d}") for d in nparray_data.shape]
    shape = pb.TensorShapeProto(dim=dims)
    if is_numeric:
        stored = _stored_as(nparray_data.dtype) or nparray_data.dtype
        little = nparray_data.astype(stored.newbyteorder("<"), copy=False)
        return pb.TensorProto(dtype=dtype, tensor_content=little.tobytes(), tensor_shape=shape)
    proto = pb.TensorProto(tensor_shape=shape)
    for s in nparray_data.reshape(-1):
        proto.string_val.append(s if isinstance(s, bytes) else str(s).encode("utf-8"))
    return proto


__all__ = ["TensorProto", "TensorShapeProto", "make_numpy_array", "make_tensor_proto"]
