"""A one-element value written into its index entry, so that reading it opens no event file.

Scalars are what a trial is read for most (losses, metrics, learning rates, saved reductions,
and every rule that walks them step by step), and each of them otherwise costs an open and a
read of that step's event file: 1,000 files for a 1,000-step history, one GET each on S3. So
the writer puts each one-element numeric value into its index entry under `INLINE_KEY` (a key
smdebug ignores), as '<numpy dtype str>|<dims, comma separated>|<hex of the bytes>', and a
compacted index keeps the same text for the values it inlines. The bytes are kept as they are,
so a value (NaN payloads included) comes back identical to the event record's.
"""

from __future__ import annotations

import numpy as np

INLINE_KEY = "inline"


def plain_numeric(dtype: np.dtype) -> bool:
    """A numeric dtype whose values are stored as `dtype.str` and their bytes (bool, integer,
    float, complex; not a structured, object or void one such as bfloat16's)."""
    return dtype.kind in "biufc" and not dtype.hasobject


def encode_inline(arr: np.ndarray) -> str | None:
    """The entry text of a one-element numeric array, else None."""
    if arr.size != 1 or not plain_numeric(arr.dtype):
        return None
    dims = ",".join(str(d) for d in arr.shape)
    return f"{arr.dtype.str}|{dims}|{np.ascontiguousarray(arr).tobytes().hex()}"


def inline_for_record(value: object, stored_dtype: str | None, orig_dtype: str | None) -> str | None:
    """The entry text of a value just encoded as a record whose bytes are `stored_dtype`: only
    for a one-element value the record stores as it is (not one widened or byte-swapped for
    smdebug's sake, whose record alone says what it is)."""
    if not isinstance(value, (np.ndarray, np.generic)) or value.size != 1 \
            or orig_dtype is not None or stored_dtype != value.dtype.str:
        return None
    return encode_inline(np.asarray(value))


def decode_inline(text: str) -> np.ndarray:
    """The array `encode_inline` described; ValueError names what is wrong."""
    try:
        dtype, dims, data = text.rsplit("|", 2)  # "|b1": a dtype may hold the separator
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        arr = np.frombuffer(bytes.fromhex(data), dtype=np.dtype(dtype))
        return arr.reshape(shape)
    except (ValueError, TypeError) as e:
        raise ValueError(f"inline value {text!r} is not '<dtype>|<dims>|<hex>' ({e})") from None


def inline_value(entry: dict) -> np.ndarray | None:
    """The value inlined in an index entry (a read-only array), or None when there is none or
    it cannot be decoded: then the value is read from the event file as usual."""
    text = entry.get(INLINE_KEY)
    if text is None or text.__class__ is not str:
        return None
    try:
        return decode_inline(text)
    except ValueError:
        return None
