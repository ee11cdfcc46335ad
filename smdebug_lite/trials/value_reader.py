"""Fetches tensor values from event files and keeps the decoded arrays per file.

smdebug reopened the event file and parsed protobuf for every value. Here decoded arrays are kept
per event file in a byte-bounded LRU cache:

* `Tensor.values()` (one tensor over many steps) reads only its record (start_idx, length from
  the index) from each file it has not seen yet: local preads on a few threads, ranged GETs on
  a bounded pool for S3. A second record wanted from the same file loads the file whole. On S3,
  files written by smdebug-lite are fetched whole instead (they are small per step, and the
  request costs more than the bytes). With 50,000 records in a trial, Python's cost per record
  decides: the usual case (one worker, files not read yet, one layout) is planned with loops
  in C (`_read_uniform`), and smdebug's records are checked and viewed together with numpy
  (`format.event_batch`).
* A single value (`Tensor.value`) reads the whole file (unless it is larger than
  `whole_file_max`), so one step of all tensors costs one read per file. A saved reduction reads
  only the file's reduction records (ranges close together merged into one read), not the raw
  tensors between them. A tensor read step after step has its next steps fetched by the bulk
  paths (`trials.read_ahead`; `read_reductions` for saved reductions, many files in one batch).
* A reduction computed from a raw value (none was saved) is kept per (tensor, worker, step);
  the first one asked of a tensor whose other steps are in memory computes theirs in the same
  numpy call (`reduction_batch`), so a sweep over steps costs little more than the lookups.
* Records are decoded without protobuf: for smdebug-lite's files the index gives dtype, shape
  and the offset of the raw bytes, which are viewed only once the entry is found to describe its
  record (`format.entry_check`: the bytes before the tensor bytes are those its name, dtype and
  shape imply); records written by smdebug are walked to their tensor bytes, their tag compared
  with the entry's name (`format.event_view`). Each record's CRC32C from the index is checked
  before use; files
  written by smdebug have no CRC in the index and are checked through the TFRecord framing
  instead (length CRC and footer). A bad record raises `TensorCorrupted` naming the file, step
  and tensor; every other record stays readable. An index entry that cannot locate a record
  (a key missing, offsets no record can have) or does not describe it raises
  `IndexFileCorrupted` naming the index file: the fast paths only test what they use and hand anything odd to the general path,
  which explains it (`format.step_index.entry_problem`). The checks and decoding of one record
  are `format.entry_record`'s, which the compaction shares.

The values of one-element records (scalars, saved reductions) are in their index entries when
smdebug-lite wrote the trial (`format.inline_value`), and a compacted index (`format.manifest`)
inlines them for any trial, smdebug-written ones included: those are answered from the entry
(`index.inline_value`) before any event file is looked at, so a scalar's history costs no read
at all. The text holds the record's own dtype, shape and bytes.

Returned arrays are read-only views of the file bytes (smdebug's arrays were read-only too), and
the same array object is returned again for the same record while it is cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import repeat
from operator import add, is_, itemgetter

import numpy as np
from crc32c import crc32c as _crc

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.config.reductions import REDUCTIONS_PREFIX, compute_reduction
from smdebug_lite.exceptions import IndexFileCorrupted, TensorCorrupted
from smdebug_lite.format.entry_check import HEADS, expected_head, head_agrees
from smdebug_lite.format.entry_record import (
    DTYPES,
    EntryMismatch,
    EntryUnusable,
    RecordDamaged,
    decode_entry_record,
)
from smdebug_lite.format.event_batch import view_events
from smdebug_lite.format.event_view import view_event
from smdebug_lite.format.records import HEADER_SIZE
from smdebug_lite.format.step_index import SHAPE_CACHE, entry_problem, sound_inline
from smdebug_lite.index import (
    INLINE_KEY,
    Entry,
    StepIndex,
    shape_tuple,
)
from smdebug_lite.storage import Storage
from smdebug_lite.storage.ranges import coalesce
from smdebug_lite.trials.reduction_batch import MIN_ROWS, batchable, reduce_rows

# The keys of an index entry written by smdebug-lite for a plain numeric tensor.
_FAST_FIELDS = itemgetter("start_idx", "length", "crc32c", "dtype", "shape", "content_offset")
_FAST_KEYS = 7  # the six above plus "tensorname"
_RANGE = itemgetter("start_idx", "length")
_EVENT_KEYS = 3  # an entry written by smdebug: tensorname, start_idx, length
# Ranges of one file at most this far apart are read as one (a local read costs about as
# much as copying 16 KiB; an S3 request, as transferring about a megabyte).
_LOCAL_GAP = 16 << 10
_REMOTE_GAP = 1 << 20
# A file's reduction records spread over at most this many bytes are read in one local read,
# whatever lies between them (cheaper than working out, and making, several reads).
_LOCAL_SPAN = 64 << 10
_ARRAY_OVERHEAD = 128  # approximate bytes of an ndarray object, for cache accounting
# Computed reductions kept (about 100 bytes each); all are dropped past this many.
_REDUCED_MAX = 1 << 18
_BATCH_BYTES = 64 << 20  # records read alone are fetched about this many bytes at a time


def _env_mb(name: str, default: float) -> int:
    return int(env_float(name, default) * (1 << 20))


class NoRawValue(LookupError):
    """sis[index] has no raw value of the tensor (only reductions or a shape)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _FileState:
    """What is known of one event file (one worker's step): its bytes once read whole, and
    decoded arrays by record name."""

    __slots__ = ("step", "worker", "data", "chunks", "arrays", "nbytes")

    def __init__(self, step: int, worker: str) -> None:
        self.step = step
        self.worker = worker
        self.data: bytes | None = None
        # Parts read without the whole file (the reduction records): (offset, bytes).
        self.chunks: list[tuple[int, bytes]] | None = None
        self.arrays: dict[str, np.ndarray] = {}
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
        self._gap = _LOCAL_GAP if storage.is_local else _REMOTE_GAP
        self._span = _LOCAL_SPAN if storage.is_local else 0
        self.file_reads = 0
        self.range_reads = 0
        self.bytes_read = 0
        self.inline_reads = 0  # values taken from their index entries' inlined text (no event file)
        # Reductions computed from raw values: (record name, worker, reduction, abs) ->
        # {step: value}. They depend on the record's bytes only, so eviction keeps them.
        self._reduced: dict[tuple[str, str, str, bool], dict[int, np.generic]] = {}
        self._reduced_count = 0
        # (event file, record name) of entries found to agree with their records unread
        # (`describes`), so that their shapes and dtypes answer without another read.
        self._agreed: set[tuple[str, str]] = set()

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
        self._agreed.clear()
        self._reduced.clear()
        self._reduced_count = 0
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
        self.bytes_read += len(data)
        fs.data = data
        fs.chunks = None  # arrays viewing them stay (and stay accounted for)
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
        dtypes_get = DTYPES.get
        shapes_get = SHAPE_CACHE.get
        heads_get = HEADS.get
        fields = _FAST_FIELDS
        decoded = 0
        items = list(si.entries.items())
        first = items[0][1] if items else None
        if first is not None and len(first) == _EVENT_KEYS:
            items = []  # smdebug's layout: each record is walked when it is wanted
        elif si.reductions:
            items += [(e.get("tensorname"), e) for r in si.reductions.values() for e in r.values()]
        for name, entry in items:
            if len(entry) != _FAST_KEYS:
                continue  # smdebug's layout, narrowing (orig_dtype): decoded on request
            try:
                start, length, crc, dtype, shape, offset = fields(entry)
            except (KeyError, TypeError):
                continue  # not our writer's layout: decoded (and explained) on request
            try:
                dt = dtypes_get(dtype)
                if dt is None or name in arrays:
                    continue  # unknown layout: decoded on request
                if adopt:
                    prev = columns.get((name, worker), {}).get(step)
                    if prev is not None:
                        arrays[name] = prev
                        continue
                end = start + length
                if end > size or crc32c(data[start + HEADER_SIZE : end - 4]) != crc:
                    continue  # explained on request: the record's damage, or the entry's
                # The entry must describe its record (name, dtype, shape, offset).
                head = heads_get((name, dtype, shape)) or expected_head(name, dtype, shape)
                if not head_agrees(data, start, length, offset, *head):
                    continue  # explained on request
                if shape.__class__ is not tuple:
                    cached = shapes_get(shape) if shape.__class__ is str else None
                    shape = shape_tuple(shape) if cached is None else cached
                arr = arrays[name] = ndarray(shape, dt, data, start + offset)
            except (TypeError, ValueError):
                continue  # a damaged entry: decoded on request, which explains it
            col = columns.get((name, worker))
            if col is None:
                col = columns[(name, worker)] = {}
            col[step] = arr
            decoded += 1
        self._account(fs, size + decoded * _ARRAY_OVERHEAD)

    def holds(self, si: StepIndex) -> bool:
        """Whether the event file of `si` is in memory whole."""
        fs = self._cache.get(si.event_rel)  # type: ignore[arg-type]
        return fs is not None and fs.data is not None

    def read_files(self, sis: Sequence[StepIndex], max_bytes: int) -> None:
        """The event files of `sis` not in memory yet, each up to `whole_file_max`, read whole
        in one batch of at most `max_bytes` (for reads of many records of each about to come);
        missing ones are skipped."""
        wanted: list[StepIndex] = []
        for si in sis:
            if si.event_rel and si.size <= self.whole_file_max and not self.holds(si):
                max_bytes -= si.size
                if max_bytes < 0:
                    break
                wanted.append(si)
        if len(wanted) > 1:
            self._prefetch(wanted)

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

    def _bad_entry(self, si: StepIndex, entry: Entry,
                   reason: str | None = None) -> IndexFileCorrupted:
        """The index file's damage, for an entry that cannot locate its record or does not
        describe it (`reason`)."""
        name = entry.get("tensorname") if isinstance(entry, dict) else None
        reason = reason or entry_problem(entry) or f"the entry of tensor {name!r} is malformed"
        return IndexFileCorrupted(self.storage.uri(si.key) if si.key else
                                  f"the index file of {self.storage.uri(si.event_rel or '')}",
                                  reason, si.step, si.worker)

    def _check_entry(self, si: StepIndex, entry: Entry) -> None:
        if entry_problem(entry) is not None:
            raise self._bad_entry(si, entry)

    def _decode(self, data: bytes, base: int, si: StepIndex, entry: Entry) -> np.ndarray:
        """Verify and decode the record starting at `base` within `data`."""
        try:
            return decode_entry_record(data, base, entry)
        except EntryMismatch as e:
            raise self._bad_entry(si, entry, e.reason) from None
        except EntryUnusable:
            raise self._bad_entry(si, entry) from None
        except RecordDamaged as e:
            raise self._corrupted(si, entry, e.reason) from None

    # -- public ----------------------------------------------------------------------------

    def read(self, si: StepIndex, entry: Entry) -> np.ndarray:
        """One record's array; FileNotFoundError when the event file does not exist (yet).

        A value inlined in its index entry (a scalar: saved reduction, one-element tensor;
        by smdebug-lite's writer or by compaction) comes from the entry, when the entry is sound
        and agrees with it (`sound_inline`): the text holds the record's own dtype, shape and
        bytes."""
        if INLINE_KEY in entry:
            arr = sound_inline(entry)
            if arr is not None:
                self.inline_reads += 1
                return arr
        rel: str = si.event_rel  # type: ignore[assignment]
        name = entry.get("tensorname")
        fs = self._cache.get(rel)
        if fs is None:
            col = self._columns.get((name, si.worker))  # type: ignore[arg-type]
            arr = col.get(si.step) if col is not None else None
            if arr is not None:
                return arr  # read alone by a bulk read
            fs = self._state(si)
        else:
            self._cache.move_to_end(rel)
            arr = fs.arrays.get(name)  # type: ignore[arg-type]
            if arr is not None:
                return arr
            if rel in self._partial:  # the file's reductions were read, this record alone
                col = self._columns.get((name, si.worker))  # type: ignore[arg-type]
                arr = col.get(si.step) if col is not None else None
                if arr is not None:
                    return arr
            if fs.data is not None or fs.chunks is not None:
                arr = self._quick(fs, name, entry)  # type: ignore[arg-type]
                if arr is not None:
                    return arr
        if fs.data is None:
            if fs.chunks is None and si.reductions and si.entries and name.startswith(  # type: ignore[union-attr]
                    REDUCTIONS_PREFIX):
                self._load_reductions(fs, si)
                arr = self._quick(fs, name, entry)  # type: ignore[arg-type]
                if arr is not None:
                    return arr
            if fs.chunks is not None:
                arr = self._from_chunks(fs, si, entry)
                if arr is not None:
                    return arr
            # A single value: other records of the same step are likely next (a rule reading
            # several tensors of one step), so the whole file is read unless it is large.
            if si.size > self.whole_file_max:
                return self._read_range(fs, si, entry)
            self._load_whole(fs, si)
        arr = fs.arrays.get(name)  # type: ignore[arg-type]
        if arr is not None:
            return arr
        arr = self._decode(fs.data, entry.get("start_idx", 0), si, entry)  # type: ignore[arg-type]
        self._remember(fs, name, arr)  # type: ignore[arg-type]
        self._account(fs, _ARRAY_OVERHEAD + (0 if arr.base is not None else arr.nbytes))
        return arr

    def describes(self, si: StepIndex, entry: Entry) -> bool:
        """Whether an entry giving dtype, shape and content_offset agrees with its record
        (`format.entry_check`), so that its shape and dtype answer for the value unread: its
        value was read already (through the checks), or the bytes before its tensor bytes
        match, from memory or one read of those few bytes. False when they differ or cannot
        be read: the caller then reads the value, which explains."""
        return self.describe_all([si], [entry])[0]

    def describe_all(self, sis: Sequence[StepIndex], entries: Sequence[Entry]) -> list[bool]:
        """`describes` for many entries, the bytes not in memory read in one batch."""
        out: list[bool] = []
        wanted: list[tuple[int, str, int, bytes]] = []  # (position, file, offset, expected)
        agreed = self._agreed
        for i, (si, entry) in enumerate(zip(sis, entries, strict=True)):
            name = entry.get("tensorname")
            fs = self._cache.get(si.event_rel)  # type: ignore[arg-type]
            col = self._columns.get((name, si.worker))  # type: ignore[arg-type]
            if (fs is not None and name in fs.arrays) or (col is not None and si.step in col) \
                    or (si.event_rel, name) in agreed:
                out.append(True)
                continue
            out.append(False)
            try:
                head, nbytes = expected_head(name, entry["dtype"], entry["shape"])  # type: ignore[arg-type]
                start, length, offset = entry["start_idx"], entry["length"], entry["content_offset"]
                at = start + offset - len(head)
                if at < start + HEADER_SIZE or offset + nbytes > length - 4:
                    continue
            except (KeyError, TypeError, ValueError):
                continue
            if fs is not None and fs.data is not None:
                out[i] = fs.data[at : start + offset] == head
            else:
                wanted.append((i, si.event_rel, at, head))  # type: ignore[arg-type]
        if wanted:
            try:
                datas = self.storage.read_ranges([w[1] for w in wanted], [w[2] for w in wanted],
                                                 [len(w[3]) for w in wanted])
            except OSError:
                return out  # a missing file: the value read waits for it or reports it
            if len(agreed) > _REDUCED_MAX:
                agreed.clear()
            for (i, rel, _, head), data in zip(wanted, datas, strict=True):
                if data == head:
                    out[i] = True
                    agreed.add((rel, entries[i].get("tensorname")))
            self.range_reads += len(wanted)
            self.bytes_read += sum(map(len, datas))
        return out

    def reduction(self, si: StepIndex, entry: Entry, reduction: str,
                  is_abs: bool) -> np.generic:
        """`compute_reduction` of the record's value (FileNotFoundError as `read`). A value
        asked for again comes from memory; the first one asked of a tensor whose other steps
        are in memory already computes theirs too, in one numpy call (`reduction_batch`)."""
        name: str = entry.get("tensorname")  # type: ignore[assignment]
        key = (name, si.worker, reduction, is_abs)
        done = self._reduced.get(key)
        if done is not None:
            value = done.get(si.step)
            if value is not None:
                return value
        arr = self.read(si, entry)
        if done is None:
            if self._reduced_count >= _REDUCED_MAX:
                self._reduced.clear()
                self._reduced_count = 0
            done = self._reduced[key] = {}
        col = self._columns.get((name, si.worker))
        if col is not None and len(col) - len(done) >= MIN_ROWS and batchable(reduction, arr):
            shape, dt = arr.shape, arr.dtype
            steps = [s for s, a in col.items() if s not in done and a.shape == shape
                     and a.dtype == dt and a.flags.c_contiguous]
            if len(steps) >= MIN_ROWS:
                found = reduce_rows(reduction, is_abs, [col[s] for s in steps], name)
                if found is not None:
                    done.update(zip(steps, found, strict=True))
                    self._reduced_count += len(found)
                    value = done.get(si.step)
                    if value is not None:
                        return value
        value = compute_reduction(reduction, arr, is_abs, tensor_name=name)
        done[si.step] = value
        self._reduced_count += 1
        return value

    def _quick(self, fs: _FileState, name: str, entry: Entry) -> np.ndarray | None:
        """A record in smdebug's layout viewed from bytes read before (the whole file or a
        part of it); None sends it down the general path, which explains any problem.

        A reduction record is kept with its file only: the per-tensor columns serve bulk reads
        of raw tensors, which never ask for reductions (and a reduction read alone is in
        `fs.arrays` already)."""
        if len(entry) != _EVENT_KEYS:
            return None
        if name.startswith(REDUCTIONS_PREFIX):
            col = None
        else:
            col = self._columns.get((name, fs.worker))
            if col is None:
                col = self._columns[(name, fs.worker)] = {}
            else:
                arr = col.get(fs.step)
                if arr is not None:  # read alone before: the same array object again
                    fs.arrays[name] = arr
                    return arr
        try:
            start, length = _RANGE(entry)
            if start.__class__ is not int or start < 0:
                return None
            data = fs.data
            if data is not None:
                arr = view_event(data, start, length, name)
            else:
                arr = None
                for offset, chunk in fs.chunks:  # type: ignore[union-attr]
                    if offset <= start and start + length <= offset + len(chunk):
                        arr = view_event(chunk, start - offset, length, name)
                        break
        except (KeyError, TypeError):
            return None
        if arr is None:
            return None
        fs.arrays[name] = arr
        if col is not None:
            col[fs.step] = arr
        fs.nbytes += _ARRAY_OVERHEAD
        self._cached_bytes += _ARRAY_OVERHEAD
        if self._cached_bytes > self.cache_bytes:
            self._evict(keep=fs)
        return arr

    def _load_reductions(self, fs: _FileState, si: StepIndex) -> None:
        """Read only the file's reduction records (raw tensors between them can be large),
        merging ranges that lie close together."""
        spans = self._reduction_spans(si)
        if not spans:
            return  # damaged entries: the record read explains which
        if len(spans) == 1:
            first, end = spans[0]
            datas = [self.storage.read(si.event_rel, first, end - first)]  # type: ignore[arg-type]
        else:
            datas = self.storage.read_ranges([si.event_rel] * len(spans),  # type: ignore[list-item]
                                             [a for a, _ in spans], [b - a for a, b in spans])
        self._keep_chunks(fs, spans, datas)

    def _reduction_spans(self, si: StepIndex) -> list[tuple[int, int]]:
        """The byte spans (start, end) of the file that hold its reduction records, close ones
        merged; [] when an entry cannot say where its record is."""
        entries = [e for r in si.reductions.values() for e in r.values()]  # type: ignore[union-attr]
        try:
            starts, lengths = zip(*map(_RANGE, entries), strict=True)
            if set(map(type, starts + lengths)) != {int} or min(starts) < 0 or min(lengths) <= 0:
                return []
            first, end = min(starts), max(map(add, starts, lengths))
            if end - first <= self._span or end - first - sum(lengths) <= self._gap:
                return [(first, end)]  # the usual case: all in one read
            return coalesce(starts, lengths, self._gap)
        except (KeyError, TypeError, ValueError):
            return []

    def _keep_chunks(self, fs: _FileState, spans: list[tuple[int, int]],
                     datas: Sequence[bytes]) -> None:
        fs.chunks = [(a, d) for (a, _), d in zip(spans, datas, strict=True)]
        size = sum(map(len, datas))
        self.range_reads += len(spans)
        self.bytes_read += size
        self._account(fs, size)

    def read_reductions(self, sis: Sequence[StepIndex]) -> None:
        """The reduction records of many files, read as `_load_reductions` reads one file's,
        in one batched read (about `_BATCH_BYTES` at a time): for saved reductions read
        step after step (`Tensor`'s read-ahead). Files already read are left alone."""
        plan: list[tuple[StepIndex, list[tuple[int, int]]]] = []
        cache_get = self._cache.get
        for si in sis:
            fs = cache_get(si.event_rel)  # type: ignore[arg-type]
            if si.reductions and (fs is None or (fs.data is None and fs.chunks is None)):
                spans = self._reduction_spans(si)
                if spans:
                    plan.append((si, spans))
        lo = 0
        while lo < len(plan):
            hi, size = lo, 0
            while hi < len(plan) and (size < _BATCH_BYTES or hi == lo):
                size += sum(b - a for a, b in plan[hi][1])
                hi += 1
            part = [(si, a, b) for si, spans in plan[lo:hi] for a, b in spans]
            datas = self.storage.read_ranges([si.event_rel for si, _, _ in part],  # type: ignore[misc]
                                             [a for _, a, _ in part], [b - a for _, a, b in part])
            at = 0
            for si, spans in plan[lo:hi]:
                fs = self._state(si)
                if fs.data is None and fs.chunks is None:
                    self._keep_chunks(fs, spans, datas[at : at + len(spans)])
                at += len(spans)
            lo = hi

    def _from_chunks(self, fs: _FileState, si: StepIndex, entry: Entry) -> np.ndarray | None:
        """The record decoded from a part of the file read before, if one holds it whole."""
        try:
            start, length = _RANGE(entry)
        except KeyError:
            return None
        if start.__class__ is not int or length.__class__ is not int:
            return None
        for offset, data in fs.chunks:  # type: ignore[union-attr]
            if offset <= start and start + length <= offset + len(data):
                arr = self._decode(data, start - offset, si, entry)
                self._remember(fs, entry["tensorname"], arr)
                self._account(fs, _ARRAY_OVERHEAD)
                return arr
        return None

    def _read_range(self, fs: _FileState, si: StepIndex, entry: Entry) -> np.ndarray:
        self._check_entry(si, entry)
        start, length = entry["start_idx"], entry["length"]
        data = self.storage.read(si.event_rel, start, length)  # type: ignore[arg-type]
        self.range_reads += 1
        self.bytes_read += len(data)
        arr = self._decode(data, 0, si, entry)
        self._remember(fs, entry["tensorname"], arr)
        self._account(fs, len(data) + _ARRAY_OVERHEAD)
        return arr

    def read_named(self, sis: Sequence[StepIndex], name: str, one_worker: bool = False,
                   chunk: int = 256) -> list[np.ndarray]:
        """The raw value of tensor `name` from each StepIndex; NoRawValue names the first one
        without. `one_worker`: every StepIndex is from the same worker (the usual case), so
        values already decoded can be taken from that worker's column of the tensor.

        A file not seen yet is read for this record only (one tensor over many steps touches
        each file once; a second record wanted loads the file whole), many files at a time.
        On S3, files written by smdebug-lite (and files seen before) are fetched whole and
        concurrently, `chunk` at a time.
        """
        entries = [si.entries.get(name) for si in sis]
        out: list[np.ndarray | None] = self._inlined(entries)
        if out and not any(map(is_, out, repeat(None))):
            return out  # type: ignore[return-value]
        if one_worker and sis:
            col = self._columns.get((name, sis[0].worker))
            if col is not None:
                cached = [col.get(si.step) for si in sis]
                out = [a if a is not None else b for a, b in zip(out, cached, strict=True)] \
                    if out else cached
                if not any(map(is_, out, repeat(None))):
                    return out  # type: ignore[return-value]
        local = self._local_root is not None
        if not out:
            done = self._read_uniform(sis, entries, name, local) if one_worker else None
            if done is not None:
                return done  # type: ignore[return-value]
            out = [None] * len(sis)
        plan, rest = self._plan(out, sis, entries, name, local)
        if plan:
            self._read_alone(out, plan, entries, name)
        if rest:
            if local:
                self._read_whole_files(out, sis, entries, rest)
            else:
                self._read_named_remote(out, sis, entries, name, chunk)
        return out  # type: ignore[return-value]

    def _read_whole_files(self, out: list[np.ndarray | None], sis: Sequence[StepIndex],
                          entries: Sequence[Entry | None], rest: list[int]) -> None:
        """Local records whose files are wanted whole (a second record of theirs): the files
        read together, about `_BATCH_BYTES` at a time, then each record decoded."""
        cache_get, most, read = self._cache.get, self.whole_file_max, self.read
        lo = 0
        while lo < len(rest):
            hi, size, whole = lo, 0, []
            while hi < len(rest) and (size < _BATCH_BYTES or hi == lo):
                si = sis[rest[hi]]
                fs = cache_get(si.event_rel)  # type: ignore[arg-type]
                if si.event_rel and si.size <= most and (fs is None or fs.data is None):
                    whole.append(si)
                    size += si.size
                hi += 1
            if len(whole) > 1:
                self._prefetch(whole)
            for i in rest[lo:hi]:
                out[i] = read(sis[i], entries[i])  # type: ignore[arg-type]
            lo = hi

    def _inlined(self, entries: Sequence[Entry | None]) -> list[np.ndarray | None]:
        """The values inlined in `entries`, None at the steps without one; [] when no step has
        one (the usual case for a tensor that is not a scalar: two lookups)."""
        if not entries:
            return []
        first, last = entries[0], entries[-1]
        if (first is None or INLINE_KEY not in first) and (last is None
                                                            or INLINE_KEY not in last):
            return []
        out: list[np.ndarray | None] = []
        add = out.append
        for entry in entries:
            add(sound_inline(entry) if entry is not None and INLINE_KEY in entry else None)
        found = len(out) - sum(map(is_, out, repeat(None)))
        if not found:
            return []
        self.inline_reads += found
        return out

    def _read_uniform(self, sis: Sequence[StepIndex], entries: Sequence[Entry | None],
                      name: str, local: bool) -> list[np.ndarray] | None:
        """The usual bulk read, with loops in C rather than per record in Python: one worker's
        files none of which was read yet, every entry in the same layout. None (nothing
        done) when the case is not that simple; the general path then takes it."""
        if None in entries:
            return None
        rels = [si.event_rel for si in sis]
        cache, partial = self._cache, self._partial
        if any(map(cache.__contains__, rels)) or not partial.isdisjoint(rels):
            return None
        sizes = set(map(len, entries))
        if len(sizes) != 1:
            return None
        size = sizes.pop()
        try:
            if size == _EVENT_KEYS:
                starts, lengths = (list(x) for x in zip(*map(_RANGE, entries),  # type: ignore[arg-type]
                                                        strict=True))
                ours = None
            elif size == _FAST_KEYS and local:
                starts, lengths, crcs, dtypes, shapes, offsets = (
                    list(x) for x in zip(*map(_FAST_FIELDS, entries),  # type: ignore[arg-type]
                                         strict=True))
                ours = crcs, dtypes, shapes, offsets
            else:
                return None
        except KeyError:
            return None
        if set(map(type, starts)) != {int} or set(map(type, lengths)) != {int} \
                or min(starts) < 0 or min(lengths) <= 0 or sum(lengths) > _BATCH_BYTES:
            return None
        datas = self.storage.read_ranges(rels, starts, lengths)
        if ours is None:
            out: list[np.ndarray | None] = view_events(datas, lengths, name)
        else:
            out = self._view_ours(name, datas, lengths, *ours)
        failed = [i for i, arr in enumerate(out) if arr is None] if any(
            map(is_, out, repeat(None))) else []
        batch = _Batch(name)
        if failed:
            bad = set(failed)
            batch.sis = [si for i, si in enumerate(sis) if i not in bad]
            added = sum(n for i, n in enumerate(lengths) if i not in bad)
        else:
            batch.sis = list(sis)
            added = sum(lengths)
        if batch.sis:
            col = self._columns.get((name, sis[0].worker))
            if col is None:
                col = self._columns[(name, sis[0].worker)] = {}
            if failed:
                col.update(zip([si.step for si in batch.sis],
                               [a for a in out if a is not None], strict=True))
                partial.update([si.event_rel for si in batch.sis])
            else:
                col.update(zip([si.step for si in sis], out, strict=True))
                partial.update(rels)
            batch.nbytes = added + len(batch.sis) * _ARRAY_OVERHEAD
            cache[batch] = batch  # type: ignore[index]
            self.range_reads += len(batch.sis)
            self.bytes_read += added
            self._cached_bytes += batch.nbytes
            if self._cached_bytes > self.cache_bytes:
                self._evict()
        for i in failed:  # read alone again through the checks that explain the problem
            si = sis[i]
            out[i] = self._read_range(self._state(si), si, entries[i])  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

    @staticmethod
    def _view_ours(name: str, datas: list[bytes], lengths: list[int], crcs: list,
                   dtypes: list, shapes: list, offsets: list) -> list[np.ndarray | None]:
        """Records of tensor `name` in smdebug-lite's layout: CRC32C checked, the entry checked
        against its record (`entry_check`), raw bytes viewed (None: failed)."""
        out: list[np.ndarray | None] = []
        add = out.append
        ndarray, crc32c, dtypes_get = np.ndarray, _crc, DTYPES.get
        last_shape = shape_t = last_dtype = dt = head = None
        for data, length, crc, dtype, shape, offset in zip(datas, lengths, crcs, dtypes,
                                                           shapes, offsets, strict=True):
            if len(data) != length or crc32c(data[HEADER_SIZE:-4]) != crc:
                add(None)
                continue
            try:
                if shape != last_shape or dtype != last_dtype:
                    shape_t = shape_tuple(shape)
                    dt = dtypes_get(dtype)
                    head = expected_head(name, dtype, shape)
                    last_shape, last_dtype = shape, dtype
                add(ndarray(shape_t, dt, data, offset)  # type: ignore[arg-type]
                    if dt is not None and head_agrees(data, 0, length, offset, *head)  # type: ignore[misc]
                    else None)
            except (TypeError, ValueError):
                last_shape = last_dtype = None  # not cached: the next record computes its own
                add(None)
        return out

    def _read_alone(self, out: list[np.ndarray | None], plan: list[tuple],
                    entries: Sequence[Entry | None], name: str) -> None:
        # Bounded batches keep the bytes in flight (and in the cache before eviction) modest.
        lo = 0
        while lo < len(plan):
            hi, size = lo, 0
            while hi < len(plan) and (size < _BATCH_BYTES or hi == lo):
                size += plan[hi][3]
                hi += 1
            part = plan[lo:hi] if lo or hi < len(plan) else plan
            datas = self.storage.read_ranges([p[1].event_rel for p in part],
                                             [p[2] for p in part], [p[3] for p in part])
            self._view_records(out, part, datas, entries, name)
            lo = hi

    def _plan(self, out: list[np.ndarray | None], sis: Sequence[StepIndex],
              entries: Sequence[Entry | None], name: str,
              local: bool) -> tuple[list[tuple], list[int]]:
        """What to read alone: records of files not read whole yet, in smdebug's layout, or
        in smdebug-lite's (local only). Each as (position in `out`, StepIndex, start, length,
        None for smdebug's layout or (crc, numpy dtype, shape, content offset)).

        Values already known are filled in and records of files held in memory decoded; the
        positions of the rest (files to read whole, layouts decoded one by one) come second.
        """
        cache_get = self._cache.get
        partial = self._partial
        read, quick = self.read, self._quick
        dtypes_get, fields, ranges = DTYPES.get, _FAST_FIELDS, _RANGE
        plan: list[tuple] = []
        add = plan.append
        rest: list[int] = []
        for i, si in enumerate(sis):
            if out[i] is not None:
                continue
            entry = entries[i]
            if entry is None:
                raise NoRawValue(i)
            rel = si.event_rel
            fs = cache_get(rel)  # type: ignore[arg-type]
            if fs is not None:
                arr = fs.arrays.get(name)
                if arr is None and (fs.data is not None or fs.chunks is not None):
                    arr = quick(fs, name, entry)
                if arr is not None:
                    out[i] = arr
                    continue
                if fs.data is not None:
                    out[i] = read(si, entry)
                    continue
                # Only parts of the file were read (its reductions): read this record alone.
            if rel in partial:
                rest.append(i)  # a second record wanted: the file is read whole
                continue
            n = len(entry)
            if n == _EVENT_KEYS:
                start, length = ranges(entry)
                if start.__class__ is int and length.__class__ is int and start >= 0 \
                        and length > 0:
                    add((i, si, start, length, None))
                else:
                    rest.append(i)  # malformed: explained when read alone
                continue
            if n == _FAST_KEYS and local:
                try:
                    start, length, crc, dtype, shape, offset = fields(entry)
                    dt = dtypes_get(dtype)
                except (KeyError, TypeError):
                    rest.append(i)
                    continue
                if dt is not None and start.__class__ is int and length.__class__ is int \
                        and start >= 0 and length > 0:
                    add((i, si, start, length, (crc, dt, shape, offset)))
                    continue
            rest.append(i)
        return plan, rest

    def _view_records(self, out: list[np.ndarray | None], plan: list[tuple],
                      datas: list[bytes], entries: Sequence[Entry | None], name: str) -> None:
        """Check each record read alone and view its raw bytes as the array."""
        columns = self._columns
        ndarray, crc32c = np.ndarray, _crc
        worker = col = last_shape = shape_t = last_dt = head = None
        added = 0
        failed: list[tuple] = []
        # smdebug's layout: the records are walked to their tensor bytes, together.
        events = [k for k, p in enumerate(plan) if p[4] is None]
        views: list[np.ndarray | None] = [None] * len(plan)
        if len(events) == len(plan):
            views = view_events(datas, [p[3] for p in plan], name)
        elif events:
            for k, arr in zip(events, view_events([datas[k] for k in events],
                                                  [plan[k][3] for k in events], name),
                              strict=True):
                views[k] = arr
        for (i, si, _, length, ours), data, arr in zip(plan, datas, views, strict=True):
            if ours is None:
                if arr is None:
                    failed.append((i, si))
                    continue
            else:
                crc, dt, shape, offset = ours
                if len(data) != length or crc32c(data[HEADER_SIZE:-4]) != crc:
                    failed.append((i, si))
                    continue
                try:
                    if shape != last_shape or dt is not last_dt:
                        shape_t = shape_tuple(shape)
                        head = expected_head(name, dt.str, shape)
                        last_shape, last_dt = shape, dt
                    if not head_agrees(data, 0, length, offset, *head):  # type: ignore[misc]
                        raise ValueError  # the entry does not describe its record
                    arr = ndarray(shape_t, dt, data, offset)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    last_shape = None
                    failed.append((i, si))
                    continue
            out[i] = arr
            if si.worker is not worker:
                worker = si.worker
                col = columns.get((name, worker))
                if col is None:
                    col = columns[(name, worker)] = {}
            col[si.step] = arr  # type: ignore[index]
            added += length
        batch = _Batch(name)
        if failed:
            bad = {id(si) for _, si in failed}
            batch.sis = [p[1] for p in plan if id(p[1]) not in bad]
        else:
            batch.sis = [p[1] for p in plan]
        if batch.sis:
            self._partial.update([si.event_rel for si in batch.sis])
            batch.nbytes = added + len(batch.sis) * _ARRAY_OVERHEAD
            self._cache[batch] = batch
            self.range_reads += len(batch.sis)
            self.bytes_read += added
            self._cached_bytes += batch.nbytes
            if self._cached_bytes > self.cache_bytes:
                self._evict()
        for i, si in failed:  # read alone again through the checks that explain the problem
            out[i] = self._read_range(self._state(si), si, entries[i])  # type: ignore[arg-type]

    def _read_named_remote(self, out: list[np.ndarray | None], sis: Sequence[StepIndex],
                           entries: Sequence[Entry | None], name: str, chunk: int) -> None:
        cache_get = self._cache.get
        read = self.read
        for lo in range(0, len(sis), chunk):
            hi = min(len(sis), lo + chunk)
            todo = [si for i, si in enumerate(sis[lo:hi], lo) if out[i] is None
                    and si.event_rel and si.size <= self.whole_file_max
                    and (cache_get(si.event_rel) is None or cache_get(si.event_rel).data is None)
                    and entries[i] is not None]
            if len(todo) > 1:
                self._prefetch(todo)
            for i in range(lo, hi):
                if out[i] is not None:
                    continue
                si = sis[i]
                entry = entries[i]
                if entry is None:
                    raise NoRawValue(i)
                fs = cache_get(si.event_rel)  # type: ignore[arg-type]
                if fs is not None:
                    arr = fs.arrays.get(name)
                    if arr is not None:
                        out[i] = arr
                        continue
                out[i] = read(si, entry)
