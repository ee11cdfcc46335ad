"""Fetches tensor values from event files and keeps the decoded arrays per file.

smdebug reopened the event file and parsed protobuf for every value. Here decoded arrays are kept
per event file in a byte-bounded LRU cache:

* `Tensor.values()` (one tensor over many steps) reads only its record from each local file it
  has not seen yet; a second record wanted from the same file loads the file whole.
* A single value (`Tensor.value`, reductions), or any read on S3, where a request costs more than
  the bytes, reads the whole file (unless it is larger than `whole_file_max`) and decodes every
  record in one sequential pass, so one step of all tensors, or all tensors of all steps, costs
  one read per file. `values()` on S3 fetches the files it needs concurrently.
* Records written by smdebug-lite are decoded without protobuf: the index gives dtype, shape and
  the offset of the raw bytes. Each record's CRC32C from the index is checked before use; files
  written by smdebug have no CRC in the index and are checked through the TFRecord framing
  instead. A bad record raises `TensorCorrupted` naming the file, step and tensor; every other
  record stays readable.

Returned arrays are read-only views of the file bytes (smdebug's arrays were read-only too), and
the same array object is returned again for the same record while it is cached.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from itertools import repeat
from operator import is_, itemgetter

import numpy as np
from crc32c import crc32c as _crc

from smdebug_lite.exceptions import TensorCorrupted
from smdebug_lite.format.records import HEADER_SIZE, RecordError, decode_record
from smdebug_lite.format.tensor_codec import decode_tensor_event, narrow
from smdebug_lite.index import Entry, StepIndex, entry_shape, shape_tuple
from smdebug_lite.index.reader import _SHAPES
from smdebug_lite.storage import Storage
from smdebug_lite.storage.local_reads import read_many

# The keys of an index entry written by smdebug-lite for a plain numeric tensor.
_FAST_FIELDS = itemgetter("start_idx", "length", "crc32c", "dtype", "shape", "content_offset")
_FAST_KEYS = 7  # the six above plus "tensorname"
_ARRAY_OVERHEAD = 128  # approximate bytes of an ndarray object, for cache accounting
_BATCH_BYTES = 64 << 20  # records read alone are fetched about this many bytes at a time
_DTYPES: dict[str, np.dtype] = {
    np.dtype(t).str: np.dtype(t)
    for t in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "?", "c8", "c16")
}


def _env_mb(name: str, default: float) -> int:
    try:
        return int(float(os.environ.get(name, default)) * (1 << 20))
    except ValueError:
        return int(default * (1 << 20))


class NoRawValue(LookupError):
    """sis[index] has no raw value of the tensor (only reductions or a shape)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _FileState:
    """What is known of one event file (one worker's step): its bytes once read whole, decoded
    arrays by record name, and records found corrupt while decoding the whole file."""

    __slots__ = ("step", "worker", "data", "arrays", "bad", "nbytes")

    def __init__(self, step: int, worker: str) -> None:
        self.step = step
        self.worker = worker
        self.data: bytes | None = None
        self.arrays: dict[str, np.ndarray] = {}
        self.bad: dict[str, str] | None = None
        self.nbytes = 0

    def held(self) -> list[tuple[str, int]]:
        return [(name, self.step) for name in self.arrays]


class _Batch:
    """Records of one tensor that one bulk read took alone from many files. They are cached
    and evicted together: a long `values()` costs one cache entry, not one per file."""

    __slots__ = ("name", "sis", "nbytes")

    def __init__(self, name: str) -> None:
        self.name = name
        self.sis: list[StepIndex] = []
        self.nbytes = 0

    def held(self) -> list[tuple[str, int]]:
        return [(self.name, si.step) for si in self.sis]


def _fast(entry: Entry) -> tuple[np.dtype, int] | None:
    """(dtype, content offset) when the record's raw bytes can be viewed without protobuf."""
    offset = entry.get("content_offset")
    dt = _DTYPES.get(entry.get("dtype"))  # type: ignore[arg-type]
    if offset is None or dt is None or entry_shape(entry) is None:
        return None
    return dt, offset


class ValueReader:
    def __init__(self, storage: Storage, cache_bytes: int | None = None,
                 whole_file_max: int | None = None) -> None:
        self.storage = storage
        self.cache_bytes = (_env_mb("SMDEBUG_READER_CACHE_MB", 512)
                            if cache_bytes is None else cache_bytes)
        self.whole_file_max = (_env_mb("SMDEBUG_READER_WHOLE_FILE_MB", 8)
                               if whole_file_max is None else whole_file_max)
        self._local_root = storage.root if storage.is_local else None
        # Least recently used first: event files by path, and batches of records read alone.
        self._cache: OrderedDict[str | _Batch, _FileState | _Batch] = OrderedDict()
        # Files with records read alone (in a batch) but not read whole.
        self._partial: set[str] = set()
        # The same arrays by (record name, worker) -> {step: array}: a tensor's values over
        # many steps are then looked up in one small, step-ordered dict instead of one file
        # state per step (far fewer scattered memory reads).
        self._columns: dict[tuple[str, str], dict[int, np.ndarray]] = {}
        self._cached_bytes = 0
        self.file_reads = 0
        self.range_reads = 0

    # -- cache -----------------------------------------------------------------------------

    def _state(self, si: StepIndex) -> _FileState:
        rel: str = si.event_rel  # type: ignore[assignment]
        fs = self._cache.get(rel)
        if fs is None:
            fs = self._cache[rel] = _FileState(si.step, si.worker)
        else:
            self._cache.move_to_end(rel)
        return fs

    def _remember(self, fs: _FileState, name: str, arr: np.ndarray) -> None:
        fs.arrays[name] = arr
        col = self._columns.get((name, fs.worker))
        if col is None:
            col = self._columns[(name, fs.worker)] = {}
        col[fs.step] = arr

    def _forget(self, fs: _FileState | _Batch) -> None:
        columns = self._columns
        if isinstance(fs, _Batch):
            for si in fs.sis:
                self._partial.discard(si.event_rel)  # type: ignore[arg-type]
                if si.event_rel in self._cache:
                    continue  # read whole since: the file's state owns the array now
                col = columns.get((fs.name, si.worker))
                if col is not None:
                    col.pop(si.step, None)
            return
        for name in fs.arrays:
            col = columns.get((name, fs.worker))
            if col is not None:
                col.pop(fs.step, None)

    def _account(self, fs: _FileState, nbytes: int) -> None:
        fs.nbytes += nbytes
        self._cached_bytes += nbytes
        if self._cached_bytes > self.cache_bytes:
            self._evict(keep=fs)

    def _evict(self, keep: _FileState | None = None) -> None:
        """Drop least recently used files until the cache fits; `keep` (the file being read)
        and the newest file always stay."""
        cache = self._cache
        while self._cached_bytes > self.cache_bytes and len(cache) > 1:
            rel, evicted = cache.popitem(last=False)
            if evicted is keep:
                cache[rel] = evicted  # back at the newest end
                if len(cache) == 1 or next(iter(cache.values())) is keep:
                    break
                continue
            self._cached_bytes -= evicted.nbytes
            self._forget(evicted)

    def clear(self) -> None:
        self._cache.clear()
        self._partial.clear()
        self._columns.clear()
        self._cached_bytes = 0

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    # -- storage ---------------------------------------------------------------------------

    def _load_whole(self, fs: _FileState, si: StepIndex, data: bytes | None = None) -> None:
        """Keep the file's bytes and decode every record that needs no protobuf, in order."""
        if data is None:
            data = self.storage.read(si.event_rel)  # type: ignore[arg-type]
        self.file_reads += 1
        fs.data = data
        arrays = fs.arrays
        columns = self._columns
        step, worker = fs.step, fs.worker
        size = len(data)
        # Records read alone before (by a bulk read) keep their array objects.
        adopt = si.event_rel in self._partial
        if adopt:
            self._partial.discard(si.event_rel)  # type: ignore[arg-type]
        ndarray = np.ndarray
        crc32c = _crc
        dtypes_get = _DTYPES.get
        shapes_get = _SHAPES.get
        fields = _FAST_FIELDS
        decoded = 0
        items = list(si.entries.items())
        if si.reductions:
            items += [(e.get("tensorname"), e) for r in si.reductions.values() for e in r.values()]
        for name, entry in items:
            try:
                start, length, crc, dtype, shape, offset = fields(entry)
            except (KeyError, TypeError):
                continue  # not our writer's layout: decoded (and explained) on request
            dt = dtypes_get(dtype)
            if dt is None or len(entry) != _FAST_KEYS or name in arrays:
                continue  # narrowing (orig_dtype) or unknown layout: decoded on request
            if adopt:
                prev = columns.get((name, worker), {}).get(step)
                if prev is not None:
                    arrays[name] = prev
                    continue
            end = start + length
            if end > size or crc32c(data[start + HEADER_SIZE : end - 4]) != crc:
                if fs.bad is None:
                    fs.bad = {}
                fs.bad[name] = self._problem(data, start, entry)
                continue
            if shape.__class__ is not tuple:
                cached = shapes_get(shape)
                shape = shape_tuple(shape) if cached is None else cached
            try:
                arr = arrays[name] = ndarray(shape, dt, data, start + offset)
            except (TypeError, ValueError):
                continue
            col = columns.get((name, worker))
            if col is None:
                col = columns[(name, worker)] = {}
            col[step] = arr
            decoded += 1
        self._account(fs, size + decoded * _ARRAY_OVERHEAD)

    def _prefetch(self, sis: Sequence[StepIndex]) -> None:
        """Read several whole files in one go (concurrently on S3); missing ones are skipped."""
        rels = [si.event_rel for si in sis]
        try:
            datas = self.storage.read_many(rels)  # type: ignore[arg-type]
        except FileNotFoundError:
            return  # each is then read on its own, which reports the missing one
        for si, data in zip(sis, datas, strict=True):
            fs = self._state(si)
            if fs.data is None:
                self._load_whole(fs, si, data)

    # -- checking and decoding -------------------------------------------------------------

    def _corrupted(self, si: StepIndex, entry: Entry, reason: str) -> TensorCorrupted:
        name = entry.get("tensorname", "?") if isinstance(entry, dict) else "?"
        return TensorCorrupted(self.storage.uri(si.event_rel or ""), si.step, name, reason)

    @staticmethod
    def _problem(data: bytes, base: int, entry: Entry) -> str:
        """Why the record at `base` fails its checks ('' when it passes)."""
        start, length = entry["start_idx"], entry["length"]
        if base + length > len(data):
            return (f"truncated: the record at byte {start} needs {length} bytes, "
                    f"{max(0, len(data) - base)} present")
        crc = entry.get("crc32c")
        if crc is not None and _crc(data[base + HEADER_SIZE : base + length - 4]) != crc:
            return f"CRC32C mismatch for the record at byte {start}"
        return ""

    def _decode(self, data: bytes, base: int, si: StepIndex, entry: Entry) -> np.ndarray:
        """Verify and decode the record starting at `base` within `data`."""
        try:
            problem = self._problem(data, base, entry)
        except (KeyError, TypeError):
            raise self._corrupted(si, entry, "malformed index entry") from None
        if problem:
            raise self._corrupted(si, entry, problem)
        fast = _fast(entry)
        if fast is not None:
            try:
                arr = np.ndarray(entry_shape(entry), fast[0], data, base + fast[1])
            except (ValueError, TypeError) as e:
                raise self._corrupted(si, entry, f"raw bytes not decodable ({e})") from None
        else:
            try:
                payload, _ = decode_record(data, base)
                arr = decode_tensor_event(payload).value
            except RecordError as e:
                raise self._corrupted(si, entry, str(e)) from None
            except Exception as e:  # protobuf DecodeError, malformed tensor proto
                raise self._corrupted(si, entry,
                                      f"undecodable event ({type(e).__name__}: {e})") from None
        orig = entry.get("orig_dtype")
        return narrow(arr, orig) if orig else arr

    # -- public ----------------------------------------------------------------------------

    def read(self, si: StepIndex, entry: Entry) -> np.ndarray:
        """One record's array; FileNotFoundError when the event file does not exist (yet)."""
        rel: str = si.event_rel  # type: ignore[assignment]
        name = entry.get("tensorname")
        fs = self._cache.get(rel)
        if fs is None:
            col = self._columns.get((name, si.worker))  # type: ignore[arg-type]
            arr = col.get(si.step) if col is not None else None
            if arr is not None:
                return arr  # read alone by a bulk read
            # A single value: other records of the same step are likely next (a rule reading
            # several tensors of one step), so the whole file is read unless it is large.
            fs = self._state(si)
            if si.size > self.whole_file_max:
                return self._read_range(fs, si, entry)
            self._load_whole(fs, si)
        else:
            self._cache.move_to_end(rel)
            arr = fs.arrays.get(name)  # type: ignore[arg-type]
            if arr is not None:
                return arr
            if fs.data is None:
                if si.size > self.whole_file_max:
                    return self._read_range(fs, si, entry)
                self._load_whole(fs, si)  # the second record wanted from this file
        arr = fs.arrays.get(name)  # type: ignore[arg-type]
        if arr is not None:
            return arr
        if fs.bad and name in fs.bad:
            raise self._corrupted(si, entry, fs.bad[name])
        arr = self._decode(fs.data, entry.get("start_idx", 0), si, entry)  # type: ignore[arg-type]
        self._remember(fs, name, arr)  # type: ignore[arg-type]
        self._account(fs, _ARRAY_OVERHEAD + (0 if arr.base is not None else arr.nbytes))
        return arr

    def _read_range(self, fs: _FileState, si: StepIndex, entry: Entry) -> np.ndarray:
        try:
            start, length = entry["start_idx"], entry["length"]
        except (KeyError, TypeError):
            raise self._corrupted(si, entry, "malformed index entry") from None
        data = self.storage.read(si.event_rel, start, length)  # type: ignore[arg-type]
        self.range_reads += 1
        arr = self._decode(data, 0, si, entry)
        self._remember(fs, entry["tensorname"], arr)
        self._account(fs, len(data) + _ARRAY_OVERHEAD)
        return arr

    def read_named(self, sis: Sequence[StepIndex], name: str, one_worker: bool = False,
                   chunk: int = 256) -> list[np.ndarray]:
        """The raw value of tensor `name` from each StepIndex; NoRawValue names the first one
        without. `one_worker`: every StepIndex is from the same worker (the usual case), so
        values already decoded can be taken from that worker's column of the tensor.

        Locally, a file not seen yet is read for this record only (one tensor over many steps
        touches each file once; a second record wanted loads the file whole), many files at a
        time (`read_many`). On S3 the files not cached yet are fetched whole and concurrently,
        `chunk` at a time.
        """
        out: list[np.ndarray | None] = []
        if one_worker and sis:
            col = self._columns.get((name, sis[0].worker))
            if col is not None:
                out = [col.get(si.step) for si in sis]
                if not any(map(is_, out, repeat(None))):
                    return out  # type: ignore[return-value]
        if not out:
            out = [None] * len(sis)
        if self._local_root is not None:
            self._read_named_local(out, sis, name)
        else:
            self._read_named_remote(out, sis, name, chunk)
        return out  # type: ignore[return-value]

    def _read_named_local(self, out: list[np.ndarray | None], sis: Sequence[StepIndex],
                          name: str) -> None:
        # Records in our writer's layout from files not read yet are fetched together: their
        # positions in `out`, StepIndex, index fields (start, length, crc, dtype, shape,
        # offset) and numpy dtype.
        idx, sel, flds, dts = self._plan(out, sis, name)
        # Bounded batches keep the bytes in flight (and in the cache before eviction) modest.
        lo = 0
        while lo < len(idx):
            hi, size = lo, 0
            while hi < len(idx) and (size < _BATCH_BYTES or hi == lo):
                size += flds[hi][1]
                hi += 1
            part = flds[lo:hi]
            datas = read_many(self._local_root, [si.event_rel for si in sel[lo:hi]],  # type: ignore[arg-type,misc]
                              [f[0] for f in part], [f[1] for f in part])
            self._view_records(out, idx[lo:hi], sel[lo:hi], part, dts[lo:hi], datas, name)
            lo = hi

    def _plan(self, out: list[np.ndarray | None], sis: Sequence[StepIndex], name: str):
        """What to read alone. Values already known are filled in, files read before are read
        whole (a second record wanted from them), other layouts are decoded one by one."""
        cache_get = self._cache.get
        partial = self._partial
        read = self.read
        dtypes_get, fields = _DTYPES.get, _FAST_FIELDS
        idx: list[int] = []
        sel: list[StepIndex] = []
        flds: list[tuple] = []
        dts: list[np.dtype] = []
        for i, si in enumerate(sis):
            if out[i] is not None:
                continue
            entry = si.entries.get(name)
            if entry is None:
                raise NoRawValue(i)
            fs = cache_get(si.event_rel)  # type: ignore[arg-type]
            if fs is not None or si.event_rel in partial:
                arr = fs.arrays.get(name) if fs is not None else None
                out[i] = arr if arr is not None else read(si, entry)
                continue
            try:
                f = fields(entry)
            except KeyError:
                f = None
            dt = dtypes_get(f[3]) if f is not None and len(entry) == _FAST_KEYS else None
            if dt is None:
                out[i] = read(si, entry)
                continue
            idx.append(i)
            sel.append(si)
            flds.append(f)  # type: ignore[arg-type]
            dts.append(dt)
        return idx, sel, flds, dts

    def _view_records(self, out: list[np.ndarray | None], idx: list[int], sel: list[StepIndex],
                      flds: list[tuple], dts: list[np.dtype], datas: list[bytes],
                      name: str) -> None:
        """Check each record read alone and view its raw bytes as the array."""
        columns = self._columns
        ndarray, crc32c = np.ndarray, _crc
        batch = _Batch(name)
        keep, touch = batch.sis.append, self._partial.add
        added = 0
        worker = col = last_shape = shape_t = None
        for i, si, (_, length, crc, _, shape, offset), dt, data in zip(
                idx, sel, flds, dts, datas, strict=True):
            if len(data) != length or crc32c(data[HEADER_SIZE:-4]) != crc:
                out[i] = self._read_range(self._state(si), si, si.entries[name])  # explains
                continue
            if shape is not last_shape:
                last_shape = shape
                shape_t = shape_tuple(shape)
            try:
                arr = out[i] = ndarray(shape_t, dt, data, offset)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                out[i] = self._read_range(self._state(si), si, si.entries[name])  # explains
                continue
            if si.worker is not worker:
                worker = si.worker
                col = columns.get((name, worker))
                if col is None:
                    col = columns[(name, worker)] = {}
            col[si.step] = arr  # type: ignore[index]
            keep(si)
            touch(si.event_rel)
            added += length + _ARRAY_OVERHEAD
        if batch.sis:
            batch.nbytes = added
            self._cache[batch] = batch
            self.range_reads += len(batch.sis)
            self._cached_bytes += added
            if self._cached_bytes > self.cache_bytes:
                self._evict()

    def _read_named_remote(self, out: list[np.ndarray | None], sis: Sequence[StepIndex],
                           name: str, chunk: int) -> None:
        cache_get = self._cache.get
        read = self.read
        for lo in range(0, len(sis), chunk):
            hi = min(len(sis), lo + chunk)
            todo = [si for i, si in enumerate(sis[lo:hi], lo) if out[i] is None
                    and si.event_rel and si.size <= self.whole_file_max
                    and (cache_get(si.event_rel) is None or cache_get(si.event_rel).data is None)
                    and name in si.entries]
            if len(todo) > 1:
                self._prefetch(todo)
            for i in range(lo, hi):
                if out[i] is not None:
                    continue
                si = sis[i]
                fs = cache_get(si.event_rel)  # type: ignore[arg-type]
                if fs is not None:
                    arr = fs.arrays.get(name)
                    if arr is not None:
                        out[i] = arr
                        continue
                entry = si.entries.get(name)
                if entry is None:
                    raise NoRawValue(i)
                out[i] = read(si, entry)
