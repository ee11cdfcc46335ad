"""`CompactedIndex`: the steps a manifest covers, held as columns instead of parsed documents.

A trial opened from a version 2 manifest keeps, per index document, a handful of numbers
(step, worker, tensor-name set, where it is stored; mode and mode step until the step table has
taken them per step): about 14 bytes instead of a parsed JSON dict per entry, so a trial's
memory hardly grows with its length. A document is
parsed into a `StepIndex` only when a step's entries are asked for, from its chunk, which is
read and kept in an LRU cache bounded by memory (`SMDEBUG_MANIFEST_CACHE_MB`, default 1024;
`SMDEBUG_MANIFEST_CACHE_CHUNKS` also bounds the count). One tensor's history reads that
tensor's section of each chunk instead of any document, and so does one value or reduction of
a small tensor (`section_at`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

import numpy as np

from smdebug_lite.config.env_settings import env_int
from smdebug_lite.exceptions import IndexFileCorrupted
from smdebug_lite.format import manifest as mf
from smdebug_lite.format.locations import index_file_name, serialize_worker
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage

logger = get_logger(__name__)

DEFAULT_CACHE_MB = 1024
DEFAULT_PARSE_AT_OPEN_MB = 256
# Parsed index documents take up to about this many times the compressed bytes of their
# chunk's document section (65x to 150x measured): the estimate that decides `parse_at_open`.
PARSED_PER_COMPRESSED_BYTE = 150
FETCH_BATCH = 16  # chunk prefixes read together when a trial opens
# Parsed index documents take about this many times their JSON text (dicts, ints, strings):
# what a cached chunk is charged against the budget, text included.
PARSED_PER_TEXT_BYTE = 5


def cache_chunks_from_env() -> int | None:
    """`SMDEBUG_MANIFEST_CACHE_CHUNKS`: at most this many chunks kept parsed (unset: no limit
    on the count, only `SMDEBUG_MANIFEST_CACHE_MB`)."""
    n = env_int("SMDEBUG_MANIFEST_CACHE_CHUNKS", 0, minimum=0)
    return n or None


def cache_bytes_from_env() -> int:
    """`SMDEBUG_MANIFEST_CACHE_MB`: memory the parsed documents of cached chunks may take. A
    chunk is evicted only past the budget, so a trial that fits answers every access pattern
    (a tensor's steps one by one, then the next tensor's) without parsing a document twice."""
    return env_int("SMDEBUG_MANIFEST_CACHE_MB", DEFAULT_CACHE_MB, minimum=1) << 20


class CompactedIndex:
    """Rows (one per usable index document a manifest covers, in key order) as numpy columns.

    `step`, `worker` (index into `workers`, sorted by name: the lowest number is the
    lexically first worker), `mode` (ModeKeys value) and `mode_step` (until `drop_modes`),
    `nameset` (index into `namesets`: the tensor names a reader lists for the document). `damaged` lists the
    documents that could not be parsed as (key, reason, step, worker)."""

    def __init__(self, storage: Storage, manifest: mf.Manifest, refs: Sequence[mf.ChunkRef],
                 range_steps: tuple[int | None, int | None] | None,
                 parse: Callable[[mf.IndexRecord], Any],
                 cache_chunks: int | None = None, cache_bytes: int | None = None) -> None:
        """Reads the prefix of each of `refs` (concurrently, `FETCH_BATCH` at a time, so that
        few are in memory at once). `parse`: an index record -> its StepIndex (the reader's
        own parsing). Raises ManifestInvalid when a prefix is missing or fails its checks."""
        self.storage = storage
        self.manifest = manifest
        self.refs = list(refs)
        self.last_step = manifest.last_step if manifest.last_step is not None else -1
        self._parse = parse
        self.cache_chunks = cache_chunks or cache_chunks_from_env()
        self.cache_bytes = cache_bytes or cache_bytes_from_env()
        self._cache: OrderedDict[int, tuple[list[mf.IndexRecord], dict[int, Any]]] = \
            OrderedDict()
        self._cost: dict[int, int] = {}  # chunk -> bytes charged for it while cached
        self.cached_bytes = 0
        self.chunk_loads = 0  # chunks read whole to parse their documents
        self.bad_chunks: dict[int, str] = {}  # chunk number -> why its documents are not used
        start, end = range_steps or (None, None)
        # Filled chunk by chunk (one chunk's decoded columns in memory at a time); workers
        # are numbered as first seen, then renumbered in name order.
        # The narrowest integer types that hold the values: about 14 bytes per index file.
        total = sum(r.files for r in refs)
        cols = {k: np.empty(total, dtype=dt) for k, dt in (
            ("step", np.int32 if self.last_step < 2**31 else np.int64), ("worker", np.int32),
            ("mode", np.int8), ("mode_step", np.int64), ("nameset", np.int32),
            ("chunk", np.int16 if len(refs) < 2**15 else np.int32),
            ("row", np.uint16 if max((r.files for r in refs), default=0) < 2**16
             else np.int32))}
        wid: dict[str, int] = {}
        nameset_ids: dict[tuple[str, ...], int] = {}
        self.damaged: list[tuple[str, str, int, str]] = []
        self.original_names: list[tuple[int, dict[str, str]]] = []
        self._tensors: list[dict[str, tuple[int, int, int]]] = []
        count = 0
        self.docs_bytes = 0  # compressed bytes of the chunks' document sections
        prefixes: list[bytes] = []
        for ci, ref in enumerate(refs):
            if ci % FETCH_BATCH == 0:
                prefixes = mf.fetch_prefixes(storage, refs[ci:ci + FETCH_BATCH])
            c = mf.decode_prefix(prefixes[ci % FETCH_BATCH], ref)
            self._tensors.append(c.tensors)
            self.docs_bytes += c.docs[1]
            keep = c.nameset != mf.DAMAGED
            in_range = np.ones(len(c.step), dtype=bool)
            if start is not None:
                in_range &= c.step >= start
            if end is not None:
                in_range &= c.step < end
            keep &= in_range
            for r, (key, reason) in sorted(c.damaged.items()):
                if in_range[r]:
                    self.damaged.append((key, reason, int(c.step[r]), c.workers[c.worker[r]]))
            rows = np.flatnonzero(keep)
            n = len(rows)
            wmap = np.array([wid.setdefault(w, len(wid)) for w in c.workers] or [0],
                            dtype=np.int32)
            nmap = np.array([nameset_ids.setdefault(x, len(nameset_ids)) for x in c.namesets]
                            or [0], dtype=np.int32)
            at = slice(count, count + n)
            cols["step"][at] = c.step[rows]
            cols["worker"][at] = wmap[c.worker[rows]]
            cols["mode"][at] = c.mode[rows]
            cols["mode_step"][at] = c.mode_step[rows]
            cols["nameset"][at] = nmap[c.nameset[rows]]
            cols["chunk"][at] = ci
            cols["row"][at] = rows
            position = {int(r): count + i for i, r in enumerate(rows)} if c.original_names \
                else {}
            for r, names in sorted(c.original_names.items()):
                if r in position:
                    self.original_names.append((position[r], names))
            count += n
            del c
        if count < total:
            cols = {k: v[:count].copy() for k, v in cols.items()}
        self.workers = sorted(wid)
        rank = np.zeros(max(len(wid), 1), dtype=np.int16 if len(wid) < 2**15 else np.int32)
        for w, i in wid.items():
            rank[i] = self.workers.index(w)
        cols["worker"] = rank[cols["worker"]]
        self.step, self.worker, self.mode = cols["step"], cols["worker"], cols["mode"]
        self.mode_step, self.nameset = cols["mode_step"], cols["nameset"]
        self._chunk, self._row = cols["chunk"], cols["row"]
        self.namesets = [frozenset(s) for s in nameset_ids]
        self._holding: dict[str, np.ndarray] = {}  # tensor -> name-set numbers listing it
        # (tensor, chunk) -> its section, decoded (None: unusable, said once); kept in an LRU
        # bounded by their bytes (a quarter of the chunk cache's budget).
        self._sections: OrderedDict[tuple[str, int], SectionValues | None] = OrderedDict()
        self._section_bytes = 0
        # Chunk -> (offset, bytes) of all its tensor sections, when all chunks' fit (see
        # `_section_bytes_of`).
        self._regions: dict[int, tuple[int, bytes]] = {}
        self._regions_fit: bool | None = None
        self._starts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.step)

    @property
    def cached_chunks(self) -> int:
        """Chunks whose documents are held parsed now."""
        return len(self._cache)

    def drop_modes(self) -> None:
        """Forget the mode columns once the step table has taken what it needs of them."""
        self.mode = np.zeros(0, dtype=self.mode.dtype)  # not a view: the memory goes
        self.mode_step = np.zeros(0, dtype=self.mode_step.dtype)

    # -- names -----------------------------------------------------------------------------

    def all_names(self) -> set[str]:
        return set().union(*self.namesets) if self.namesets else set()

    def namesets_holding(self, name: str) -> np.ndarray:
        found = self._holding.get(name)
        if found is None:
            if len(self._holding) > 4096:
                self._holding.clear()
            found = self._holding[name] = np.array(
                [i for i, s in enumerate(self.namesets) if name in s], dtype=np.int32)
        return found

    def rows_holding(self, name: str, since: int = 0) -> np.ndarray:
        """Boolean mask over rows `since`.. of those listing tensor `name`."""
        return np.isin(self.nameset[since:], self.namesets_holding(name))

    # -- documents -------------------------------------------------------------------------

    def step_index(self, pos: int) -> Any:
        """The parsed document of row `pos` (kept while its chunk stays cached). A chunk found
        damaged or gone since the trial was opened is reported once, and its steps are read
        from their per-step index files instead."""
        ci, row = int(self._chunk[pos]), int(self._row[pos])
        hit = self._chunk_docs(ci) if ci not in self.bad_chunks else None
        if hit is None:
            return self._from_index_file(pos)
        records, parsed = hit
        si = parsed.get(row)
        if si is None:
            si = parsed[row] = self._parse(records[row])
        return si

    @property
    def parse_at_open(self) -> bool:
        """Whether the whole index is parsed when the trial opens, as its per-step files
        would be, so that no later read pays for it: when the parsed index is small
        (`SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB`, default 256, and within the cache), unless one
        worker wrote it and every chunk holds the small values' sections (written by this
        release with `SMDEBUG_MANIFEST_VALUE_BYTES` > 0): then values, histories and
        reductions of small tensors come from the sections, and a chunk's documents are
        parsed only when a step's entries are first needed (a large tensor's value, a shape),
        as in a long trial, whose memory stays bounded."""
        if self.refs and len(self.workers) <= 1 and all(r.values > 0 for r in self.refs):
            return False
        estimate = self.docs_bytes * PARSED_PER_COMPRESSED_BYTE
        limit = env_int("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB", DEFAULT_PARSE_AT_OPEN_MB,
                        minimum=0) << 20
        return estimate <= min(limit, self.cache_bytes)

    def records(self) -> Iterator[mf.IndexRecord]:
        """Every row's index record, in row order, one chunk parsed at a time and not cached
        (for a trial parsed whole at open): a chunk's documents are inflated ahead of the
        caller's parsing (see `inflate_ahead`), and on remote storage the next chunk downloads
        meanwhile (at most two in memory). Raises ManifestInvalid for a chunk that fails its
        checks or is gone."""
        todo = [(ref, rows) for ci, ref in enumerate(self.refs)
                if (rows := self._row[self._chunk == ci].tolist())]
        read = self.storage.read
        with nullcontext() if self.storage.is_local or len(todo) < 2 else ThreadPoolExecutor(
                1, thread_name_prefix="smdebug-lite-chunk") as pool:
            ahead = pool.submit(read, todo[0][0].key) if pool is not None else None
            for i, (ref, rows) in enumerate(todo):
                try:
                    data = ahead.result() if ahead is not None else read(ref.key)
                except FileNotFoundError:
                    raise mf.ManifestInvalid(ref.key, "the chunk no longer exists") from None
                if pool is not None and i + 1 < len(todo):
                    ahead = pool.submit(read, todo[i + 1][0].key)
                yield from _wanted_records(data, ref, rows)
                del data

    def _chunk_docs(self, ci: int) -> tuple[list[mf.IndexRecord], dict[int, Any]] | None:
        hit = self._cache.get(ci)
        if hit is not None:
            self._cache.move_to_end(ci)
            return hit
        ref = self.refs[ci]
        try:
            try:
                data = self.storage.read(ref.key)
            except FileNotFoundError:
                raise mf.ManifestInvalid(ref.key, "the chunk no longer exists") from None
            cols = mf.decode_prefix(data[:ref.prefix], ref)
            records = mf.decode_docs(data, cols, ref)
        except mf.ManifestInvalid as e:
            self.bad_chunks[ci] = e.reason
            logger.warning("Not using the compacted index chunk %s (%s); reading the per-step "
                           "index files of steps %d..%d instead", self.storage.uri(ref.key),
                           e.reason, ref.first_step, ref.last_step)
            return None
        self.chunk_loads += 1
        cost = PARSED_PER_TEXT_BYTE * sum(len(r.raw) for r in records)
        hit = self._cache[ci] = (records, {})
        self._cost[ci] = cost
        self.cached_bytes += cost
        limit = self.cache_chunks
        while len(self._cache) > 1 and (self.cached_bytes > self.cache_bytes
                                        or (limit is not None and len(self._cache) > limit)):
            old, _ = self._cache.popitem(last=False)
            self.cached_bytes -= self._cost.pop(old)
        return hit

    def _from_index_file(self, pos: int) -> Any:
        step, worker = int(self.step[pos]), self.workers[int(self.worker[pos])]
        key = index_file_name(step, serialize_worker(worker))
        try:
            raw = self.storage.read(key)
        except FileNotFoundError:
            ref = self.refs[int(self._chunk[pos])]
            raise IndexFileCorrupted(self.storage.uri(ref.key), self.bad_chunks.get(
                int(self._chunk[pos]), "damaged"), step, worker) from None
        return self._parse(mf.IndexRecord(key, raw, {}, step, worker))

    # -- one value from a tensor section ---------------------------------------------------

    def section_at(self, name: str, pos: int) -> tuple[SectionValues, int] | None:
        """The section of raw tensor `name` in the chunk of row `pos`, decoded (kept in an
        LRU), and the row's number in it; None when the chunk has no usable section of it.
        `values[row]` is None where the section holds no value (the documents answer)."""
        sec = self._section(name, int(self._chunk[pos]))
        return None if sec is None else (sec, int(self._row[pos]))

    def _section(self, name: str, ci: int) -> SectionValues | None:
        key = (name, ci)
        sections = self._sections
        if key in sections:
            sections.move_to_end(key)
            return sections[key]
        entry = self._tensors[ci].get(name)
        if entry is None or ci in self.bad_chunks:
            return None
        ref = self.refs[ci]
        sec = None
        try:
            data = self._section_bytes_of(ci, entry[0], entry[1])
            sec = SectionValues(mf.decode_tensor_section(data, self._tensors[ci], name, ref),
                                ref.files)
        except (FileNotFoundError, mf.ManifestInvalid) as e:  # kept as None: said once
            logger.warning("Not using the section of %r in the compacted index chunk %s (%s); "
                           "reading its values from the index documents and event files",
                           name, self.storage.uri(ref.key),
                           e.reason if isinstance(e, mf.ManifestInvalid) else "it is gone")
        sections[key] = sec
        self._section_bytes += sec.nbytes if sec is not None else 0
        budget = self.cache_bytes // 4
        while len(sections) > 1 and self._section_bytes > budget:
            _, old = sections.popitem(last=False)
            self._section_bytes -= old.nbytes if old is not None else 0
        return sec

    def _section_bytes_of(self, ci: int, offset: int, size: int) -> bytes:
        """A tensor section's bytes as stored. When the tensor sections of every chunk fit
        in an eighth of the cache's budget together, a chunk's are read in one request and
        kept (a sweep over tensors then costs one GET per chunk on S3, not one per tensor
        and chunk); otherwise each section is read alone."""
        if self._regions_fit is None:
            total = sum(end - start for start, end in map(_region, self._tensors))
            self._regions_fit = total <= self.cache_bytes // 8
        key = self.refs[ci].key
        if not self._regions_fit:
            return self.storage.read_ranges([key], [offset], [size])[0]
        held = self._regions.get(ci)
        if held is None:
            start, end = _region(self._tensors[ci])
            held = self._regions[ci] = (start, self.storage.read_ranges([key], [start],
                                                                       [end - start])[0])
        start, data = held
        return data[offset - start:offset - start + size]

    # -- one tensor's history --------------------------------------------------------------

    def pick_rows(self, name: str, gsteps: np.ndarray, worker: int | None) -> np.ndarray:
        """Per global step, the row a value of `name` is read from: `worker`'s, else the
        lexically first worker's among those listing `name`; -1 where there is none."""
        mask = self.rows_holding(name)
        out = np.full(len(gsteps), -1, dtype=np.int64)
        if worker is None and mask.all():
            # Every row lists it (the usual case): the step's first row, when it is the
            # lexically first worker's (rows are in key order), needs no sort.
            del mask
            first = self._step_starts()
            lowest = np.minimum.reduceat(self.worker, first) if len(first) else first
            if np.array_equal(self.worker[first], lowest):
                return self._lookup_steps(self.step[first], first, gsteps, out)
            mask = np.ones(len(self.step), dtype=bool)
        if worker is not None:
            mask &= self.worker == worker
        cand = np.flatnonzero(mask)
        if not len(cand) or not len(gsteps):
            return out
        order = np.lexsort((self.worker[cand], self.step[cand]))
        cand = cand[order]
        steps = self.step[cand]
        ustep, first = np.unique(steps, return_index=True)
        return self._lookup_steps(ustep, cand[first], gsteps, out)

    def _step_starts(self) -> np.ndarray:
        """The first row of each step (rows are in step order)."""
        if self._starts is None:
            steps = self.step
            self._starts = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]]) \
                if len(steps) else np.zeros(0, dtype=np.int64)
        return self._starts

    @staticmethod
    def _lookup_steps(ustep: np.ndarray, rows: np.ndarray, gsteps: np.ndarray,
                      out: np.ndarray) -> np.ndarray:
        """out[i] = rows[j] where ustep[j] == gsteps[i] (ustep sorted); others left as they are."""
        if not len(ustep) or not len(gsteps):
            return out
        first = rows
        idx = np.searchsorted(ustep, gsteps)
        ok = idx < len(ustep)
        ok[ok] = ustep[idx[ok]] == gsteps[ok]
        out[ok] = first[idx[ok]]
        return out

    def inlined(self, name: str, rows: np.ndarray) -> list[np.ndarray]:
        """The inlined values of `name` at `rows` (all >= 0), for the longest leading run of
        rows that has one; read from the tensor's section of each chunk concerned."""
        if not len(rows):
            return []
        chunk_of = self._chunk[rows]
        starts = np.flatnonzero(np.r_[True, chunk_of[1:] != chunk_of[:-1]])
        runs = [(int(chunk_of[a]), int(a), int(b)) for a, b in
                zip(starts, np.r_[starts[1:], len(rows)], strict=True)]
        wanted = []
        for ci, a, b in runs:
            if name not in self._tensors[ci]:
                break
            wanted.append((ci, a, b))
        if not wanted:
            return []
        keys = [self.refs[ci].key for ci, _, _ in wanted]
        offsets = [self._tensors[ci][name][0] for ci, _, _ in wanted]
        sizes = [self._tensors[ci][name][1] for ci, _, _ in wanted]
        try:
            datas = self.storage.read_ranges(keys, offsets, sizes)
        except FileNotFoundError:
            return []
        out: list[np.ndarray] = []
        for (ci, a, b), data in zip(wanted, datas, strict=True):
            ref = self.refs[ci]
            try:
                column = mf.decode_tensor_section(data, self._tensors[ci], name, ref)
            except mf.ManifestInvalid:
                return out  # the documents answer instead, or explain
            values = SectionValues(column, ref.files).values
            for row in self._row[rows[a:b]].tolist():
                if values[row] is None:
                    return out  # the longest leading run with a value
                out.append(values[row])
        return out


def _wanted_records(data: bytes, ref: mf.ChunkRef, rows: list[int]) -> Iterator[mf.IndexRecord]:
    """The records of `rows` (ascending) among a chunk's documents."""
    wanted = iter(rows)
    want = next(wanted)
    for row, record in enumerate(mf.iter_docs(data, mf.decode_prefix(data[:ref.prefix], ref),
                                              ref)):
        if row == want:
            yield record
            want = next(wanted, -1)


class SectionValues:
    """One tensor's section of one chunk, decoded: its values by row (read-only arrays, as
    the event records decode to; None where it holds none). `reduced`: the (reduction, abs)
    pairs that any document of the chunk saved of the tensor (None: not known, in chunks of
    earlier releases). `derived`: what a reader computes from the values, kept and evicted
    with them."""

    __slots__ = ("values", "reduced", "nbytes", "derived")

    def __init__(self, column: mf.TensorColumn, files: int) -> None:
        values: list[Any] = [None] * files
        for rows, arrays in column.groups:
            arrays.flags.writeable = False
            for i, row in enumerate(rows.tolist()):
                values[row] = arrays[i, ...]
        self.values = values
        self.reduced = column.reduced
        self.nbytes = sum(a.nbytes for _, a in column.groups) + 64 * files
        self.derived: dict[Any, Any] = {}


def _region(tensors: dict[str, tuple[int, int, int]]) -> tuple[int, int]:
    """(first byte, end) of a chunk's tensor sections, which lie back to back; (0, 0) for
    none."""
    if not tensors:
        return 0, 0
    return (min(o for o, _, _ in tensors.values()),
            max(o + n for o, n, _ in tensors.values()))
