"""The record an index entry points at: checked and decoded from the bytes holding it.

Two readers share this: a trial's value reader (`trials.value_reader`, which adds the reads
and the cache) and the compaction (`writer.compaction`, which keeps small records' values in
the manifest). For smdebug-lite's files the entry gives dtype, shape and the offset of the raw
bytes, which are viewed in place; smdebug's records are walked to their tensor bytes
(`event_view`), and anything else is decoded with protobuf. The record's CRC32C from the entry
is checked first; smdebug's entries carry none, and their records are checked through the
TFRecord framing instead.
"""

from __future__ import annotations

import numpy as np
from crc32c import crc32c as _crc

from smdebug_lite.format.entry_check import (
    entry_agrees,
    entry_mismatch,
    length_mismatch,
)
from smdebug_lite.format.event_view import view_event
from smdebug_lite.format.records import HEADER_SIZE, RecordError, decode_record
from smdebug_lite.format.step_index import Entry, entry_problem, entry_shape
from smdebug_lite.format.tensor_codec import WIDENED_FROM, decode_tensor_event, narrow

# dtype names an entry may give (numpy's `dtype.str`) for raw bytes viewed without protobuf.
DTYPES: dict[str, np.dtype] = {
    np.dtype(t).str: np.dtype(t)
    for t in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?", "c8", "c16")
}


class EntryUnusable(ValueError):
    """An index entry that cannot locate its record (a key missing, an impossible offset or
    value); `step_index.entry_problem` explains it. `EntryMismatch` (an entry that does not
    describe its record) is one, with its own explanation."""


class EntryMismatch(EntryUnusable):
    """An index entry that does not describe the record it points at; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RecordDamaged(ValueError):
    """The record fails its checks or cannot be decoded; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fast_layout(entry: Entry) -> tuple[np.dtype, int] | None:
    """(dtype, content offset) when the record's raw bytes can be viewed without protobuf.
    TypeError / ValueError for a damaged entry."""
    offset = entry.get("content_offset")
    dt = DTYPES.get(entry.get("dtype"))  # type: ignore[arg-type]
    if offset is None or dt is None or entry_shape(entry) is None:
        return None
    if offset.__class__ is not int or not HEADER_SIZE <= offset < entry["length"]:
        raise EntryUnusable
    return dt, offset


def record_problem(data: bytes, base: int, entry: Entry) -> str:
    """Why the record at `base` fails its checks ('' when it passes); KeyError, TypeError
    or EntryUnusable for an entry that cannot locate a record."""
    start, length = entry["start_idx"], entry["length"]
    if start.__class__ is not int or length.__class__ is not int or start < 0 \
            or length < HEADER_SIZE + 4 or base < 0:
        raise EntryUnusable
    if base + length > len(data):
        return (f"truncated: the record at byte {start} needs {length} bytes, "
                f"{max(0, len(data) - base)} present")
    crc = entry.get("crc32c")
    if crc is not None:
        if crc.__class__ is not int:
            raise EntryUnusable
        if _crc(data[base + HEADER_SIZE : base + length - 4]) != crc:
            return f"CRC32C mismatch for the record at byte {start}"
    return ""


def decode_entry_record(data: bytes, base: int, entry: Entry) -> np.ndarray:
    """Verify and decode the record starting at `base` within `data`: EntryUnusable when the
    entry cannot locate it or does not describe it (`EntryMismatch`: its name, dtype, shape,
    offsets are not the record's), RecordDamaged when the record is damaged."""
    try:
        problem = record_problem(data, base, entry)
        fast = fast_layout(entry)
    except (KeyError, TypeError, ValueError):
        raise EntryUnusable from None
    if problem:
        if problem.startswith("truncated") and entry_problem(entry) is not None:
            raise EntryUnusable
        reason = length_mismatch(data, base, entry)
        if reason:
            raise EntryMismatch(reason)
        raise RecordDamaged(problem)
    name = entry.get("tensorname")
    if fast is not None and entry_agrees(data, base, entry):
        try:
            arr = np.ndarray(entry_shape(entry), fast[0], data, base + fast[1])
        except (ValueError, TypeError) as e:
            raise RecordDamaged(f"raw bytes not decodable ({e})") from None
        orig = entry.get("orig_dtype")
        return _narrowed(arr, orig, name) if orig else arr
    if fast is None:
        view = view_event(data, base, entry["length"], name)
        if view is not None:
            orig = entry.get("orig_dtype")
            return _narrowed(view, orig, name) if orig else view
    # Protobuf: records the walk does not view, entries the record does not agree with.
    reason = entry_mismatch(data, base, entry)
    if reason:
        raise EntryMismatch(reason)
    try:
        payload, _ = decode_record(data, base)
        arr = decode_tensor_event(payload).value
    except RecordError as e:
        raise RecordDamaged(str(e)) from None
    except Exception as e:  # protobuf DecodeError, malformed tensor proto
        raise RecordDamaged(f"undecodable event ({type(e).__name__}: {e})") from None
    orig = entry.get("orig_dtype")
    return _narrowed(arr, orig, name) if orig else arr


def _narrowed(arr: np.ndarray, orig: object, name: object) -> np.ndarray:
    """`narrow` to the entry's `orig_dtype`, which must be one the writer widens to the stored
    dtype and must hold the stored values exactly (the writer only widens losslessly): one
    that would change them is the entry's damage, not a value."""
    exact = orig in WIDENED_FROM.get(arr.dtype.str, ())
    try:
        out = narrow(arr, orig) if exact else arr  # type: ignore[arg-type]
        exact = exact and (out is arr or np.array_equal(out.astype(arr.dtype), arr,
                                                        equal_nan=arr.dtype.kind in "fc"))
    except (TypeError, ValueError):
        exact = False
    if not exact:
        raise EntryMismatch(f"the entry of tensor {name!r} has orig_dtype={orig!r}, which does "
                            f"not hold its record's {arr.dtype.str!r} values")
    return out
