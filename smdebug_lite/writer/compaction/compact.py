"""Compaction: pack a trial's per-step index files into a manifest (`format/manifest.py`).

Works on any trial, local or s3://, written by smdebug-lite or by smdebug. Only steps every
writing worker has gone past are covered (a worker writes its steps in order, so nothing can
appear later at or before the step all of them have reached): the same rule a reader uses to
call a step complete, which makes compacting a trial still being written safe. A valid
manifest is extended: its chunks are kept and only the index files after it are read.

A chief hook's close calls `compact_at_close`; `compact_trial` serves any trial (the
`smdebug-lite compact` command, docs/scale.md).
"""

from __future__ import annotations

import json
import math
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

from smdebug_lite.config.env_settings import env_bool, env_int
from smdebug_lite.config.reductions import REDUCTIONS_PREFIX
from smdebug_lite.exceptions import IndexFileCorrupted, IndexReaderException
from smdebug_lite.format import manifest as mf
from smdebug_lite.format.inline_value import INLINE_KEY, encode_inline, plain_numeric
from smdebug_lite.format.locations import (
    COLLECTIONS_DIR,
    END_OF_JOB_FILE,
    INDEX_DIR,
    parse_collections_file_name,
    parse_index_file_name,
)
from smdebug_lite.format.step_index import (
    Entry,
    StepIndex,
    all_entries,
    entry_shape,
    parse_step_index,
)
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage, open_storage
from smdebug_lite.writer.compaction.small_values import read_small_values

logger = get_logger(__name__)

_SMALL_RECORD = 256  # an entry without a shape this short may hold one value: worth a look
# Small records' values kept in the manifest's tensor sections (bytes of the value at most),
# so the history of a bias, a norm or a small layer is read from the manifest, not from one
# event file per step.
DEFAULT_VALUE_BYTES = 1024
_RECORD_FRAMING = 512  # a record's bytes beyond its value's are fewer than this
# At hook close, smaller trials are left as they are: compacting costs more than it saves.
# From a hundred index files on, a manifest opens an S3 trial in a few requests instead of one
# per file, and a local one several times faster than parsing every document.
DEFAULT_MIN_FILES = 100


@dataclass(slots=True)
class CompactionResult:
    """What `compact_trial` did; `str()` is a one-line summary."""

    uri: str
    first_step: int | None = None  # steps the manifest covers after this run
    last_step: int | None = None
    index_files: int = 0  # index documents the manifest holds
    index_files_read: int = 0  # per-step index files read by this run
    chunks_written: int = 0
    chunks_reused: int = 0
    values_inlined: int = 0  # one-element values (tensor sections and document headers)
    values_kept: int = 0  # small multi-element values (tensor sections)
    requests: int | None = None  # S3 requests made (None on local storage)
    seconds: float = 0.0
    note: str = ""  # why nothing (more) was compacted, or what was replaced
    chunks_checked: int = 0  # chunks of the manifest found read whole and checked
    # The manifest as this run left it: what a later run of the same writer may trust.
    manifest: mf.Manifest | None = field(default=None, repr=False, compare=False)

    @property
    def steps_covered(self) -> int:
        return 0 if self.first_step is None else self.last_step - self.first_step + 1  # type: ignore[operator]

    def __str__(self) -> str:
        steps = ("no steps" if self.first_step is None
                 else f"steps {self.first_step}..{self.last_step}")
        req = "" if self.requests is None else f", {self.requests} S3 requests"
        note = f" ({self.note})" if self.note else ""
        return (f"{self.uri}: manifest covers {steps} in {self.index_files} index files; "
                f"read {self.index_files_read} index files, wrote {self.chunks_written} chunks "
                f"(kept {self.chunks_reused}), inlined {self.values_inlined} values, kept "
                f"{self.values_kept} small values{req} in "
                f"{self.seconds:.2f}s{note}")


def compact_trial(uri: str | Storage, *, inline: bool = True, min_files: int = 0,
                  chunk_steps: int = mf.CHUNK_STEPS, whole_chunks: bool = False,
                  trusted: mf.Manifest | None = None,
                  recheck_current: bool = True) -> CompactionResult:
    """Write or extend the manifest of the trial at `uri` (a directory or s3://bucket/prefix,
    or the `Storage` a writer holds open on it).

    `inline`: read the event records of one-element tensors and saved reductions, and of
    small raw tensors (values of at most `SMDEBUG_MANIFEST_VALUE_BYTES` bytes, default 1024;
    0 keeps one-element values only), and keep their values in the manifest. `min_files`:
    leave a trial with fewer new index files to cover (and no manifest yet) alone.
    `whole_chunks`: cover only whole blocks of `chunk_steps` steps, so that a trial compacted
    as it is written gets the chunks compacting it once would give. `trusted`: the manifest a
    previous run left (its `result.manifest`); if the head still says exactly that, its chunks
    are not read again (extending a growing trial would otherwise read it all each time).
    `recheck_current=False`: a manifest with no index file after it is left as it is without
    reading its chunks (readers check them anyway, and ignore a damaged one); it is read and
    checked, and replaced if damaged, before it is extended."""
    if chunk_steps < 1:
        raise ValueError(f"chunk_steps={chunk_steps!r}: expected a positive integer")
    started = time.monotonic()
    storage = uri if isinstance(uri, Storage) else open_storage(uri)
    requests_before = getattr(storage, "requests", None)
    result = CompactionResult(storage.uri())
    existing = _existing(storage, result, trusted, read_chunks=recheck_current)
    after = existing.last_key if existing else None
    keys = [k for k in storage.list(INDEX_DIR, start_after=after)
            if k.startswith(INDEX_DIR + "/") and parse_index_file_name(k) is not None]
    if keys and existing and not recheck_current and \
            not _chunks_sound(storage, existing, result, trusted):  # to be extended: checked
        return _rebuild(storage, inline, chunk_steps, whole_chunks, started, result)
    last_of_worker = dict(existing.last_step_of_worker) if existing else {}
    for k in keys:
        step, worker = parse_index_file_name(k)  # type: ignore[misc]
        if step > last_of_worker.get(worker, -1):
            last_of_worker[worker] = step
    if existing and existing.last_step is not None and keys:
        early = parse_index_file_name(keys[0])[0]  # type: ignore[index]
        if early <= existing.last_step:
            result.note = f"replaced a stale manifest: {keys[0]} is newer than it"
            return _rebuild(storage, inline, chunk_steps, whole_chunks, started, result)
    expected = _writing_workers(storage)
    cut = min(last_of_worker.values()) if len(last_of_worker) >= max(1, expected) else -1
    if whole_chunks:
        cut = (cut + 1) // chunk_steps * chunk_steps - 1
    todo = [k for k in keys if parse_index_file_name(k)[0] <= cut]  # type: ignore[index]
    chunks = list(existing.chunks) if existing else []
    result.chunks_reused = len(chunks)
    if not todo or (existing is None and len(todo) < min_files):
        if not result.note:
            result.note = ("up to date" if existing and not todo else
                           f"{len(todo)} index files to cover, fewer than {min_files}"
                           if todo else "no step every worker has finished yet")
        _finish(result, existing, storage, requests_before, started)
        return result
    last_key, last_crc = "", 0
    value_bytes = env_int("SMDEBUG_MANIFEST_VALUE_BYTES", DEFAULT_VALUE_BYTES, minimum=0) \
        if inline else 0
    for group in _groups(todo, chunk_steps):
        texts = storage.read_many(group)
        result.index_files_read += len(group)
        records = [mf.IndexRecord(k, t) for k, t in zip(group, texts, strict=True)]
        inlined, kept = _describe(storage, records, inline, value_bytes)
        result.values_inlined += inlined
        result.values_kept += kept
        chunks.append(write_chunk(storage, records, value_bytes))
        result.chunks_written += 1
        last_key, last_crc = group[-1], zlib.crc32(texts[-1])
    m = mf.Manifest(chunks, last_key, last_crc,
                    dict(existing.last_step_of_worker) if existing else {})
    for k in todo:
        step, worker = parse_index_file_name(k)  # type: ignore[misc]
        m.last_step_of_worker[worker] = max(step, m.last_step_of_worker.get(worker, -1))
    write_head(storage, m)
    _remove_orphans(storage, m)
    _finish(result, m, storage, requests_before, started)
    return result


def compact_at_close(out_dir: str | Storage, chief: bool = True) -> CompactionResult | None:
    """The hook's call at close: compacts unless `SMDEBUG_COMPACT=0`, the caller is not the
    chief worker, or the trial has fewer than `SMDEBUG_COMPACT_MIN_FILES` (default 100) index
    files. Never raises: a failure is logged and the trial stays readable without a manifest."""
    if not chief or not env_bool("SMDEBUG_COMPACT", True):
        return None
    min_files = env_int("SMDEBUG_COMPACT_MIN_FILES", DEFAULT_MIN_FILES)
    try:
        # Nothing is left when the writer's last extension covered the tail (docs/scale.md).
        result = compact_trial(out_dir, min_files=min_files, recheck_current=False)
        if result.chunks_written:  # a short run is left as it is, and says nothing
            logger.info("Compacted the index: %s", result)
        return result
    except Exception as e:  # the trial is complete without a manifest
        where = out_dir.uri() if isinstance(out_dir, Storage) else out_dir
        logger.warning("Could not compact the index of %s: %s: %s", where, type(e).__name__, e)
        return None


def write_chunk(storage: Storage, records: list[mf.IndexRecord], values: int = 0) -> mf.ChunkRef:
    """A chunk, stored under its content's name (never rewritten in place while read)."""
    data, ref = mf.build_chunk(records, values)
    storage.write_atomic(ref.key, data)
    return ref


def write_head(storage: Storage, m: mf.Manifest) -> None:
    """The head, written last and atomically: the commit point of a compaction."""
    storage.write_atomic(mf.HEAD_KEY, mf.encode_head(m))


# -- steps of compact_trial ----------------------------------------------------------------

def _existing(storage: Storage, result: CompactionResult,
              trusted: mf.Manifest | None = None, read_chunks: bool = True,
              ) -> mf.Manifest | None:
    """The trial's manifest if it passes every check a reader makes, else None. The chunks
    of a head equal to `trusted` are taken as checked; `read_chunks=False`: the head's own
    checks only (`_chunks_sound` does the rest later)."""
    try:
        m = mf.read_head(storage)
        if m is None or (read_chunks and not _chunks_sound(storage, m, result, trusted)):
            return None
        mf.check_fresh(storage, m)
        return m
    except mf.ManifestInvalid as e:
        _invalid(storage, result, e)
        return None


def _chunks_sound(storage: Storage, m: mf.Manifest, result: CompactionResult,
                  trusted: mf.Manifest | None) -> bool:
    """Whether every chunk of `m` reads back and passes its checks (taken as so when `m` is
    `trusted`)."""
    if m == trusted:
        return True
    try:
        mf.read_chunks(storage, m.chunks)
    except mf.ManifestInvalid as e:
        _invalid(storage, result, e)
        return False
    result.chunks_checked = len(m.chunks)
    return True


def _invalid(storage: Storage, result: CompactionResult, e: mf.ManifestInvalid) -> None:
    logger.warning("Replacing the manifest of %s: %s", storage.uri(), e)
    result.note = f"replaced an invalid manifest: {e.reason}"


def _rebuild(storage: Storage, inline: bool, chunk_steps: int, whole_chunks: bool,
             started: float, result: CompactionResult) -> CompactionResult:
    storage.delete(mf.HEAD_KEY)
    fresh = compact_trial(storage, inline=inline, chunk_steps=chunk_steps, whole_chunks=whole_chunks)
    fresh.note = result.note
    fresh.seconds = time.monotonic() - started
    return fresh


def _writing_workers(storage: Storage) -> int:
    """How many workers write index files: num_workers of a collections file, else the
    number of collections files."""
    files = [k for k in storage.list(COLLECTIONS_DIR) if parse_collections_file_name(k)]
    if not files:
        return 1 if storage.exists(END_OF_JOB_FILE) else 0
    try:
        meta = json.loads(storage.read(files[0])).get("_meta", {})
        return max(len(files), int(meta.get("num_workers", 1)))
    except (ValueError, TypeError, AttributeError):
        return len(files)


def _groups(keys: list[str], chunk_steps: int) -> list[list[str]]:
    """Keys split at multiples of `chunk_steps` (keys are in step order)."""
    out: list[list[str]] = []
    current = -1
    for k in keys:
        g = parse_index_file_name(k)[0] // chunk_steps  # type: ignore[index]
        if g != current:
            out.append([])
            current = g
        out[-1].append(k)
    return out


def _describe(storage: Storage, records: list[mf.IndexRecord], inline: bool,
              limit: int) -> tuple[int, int]:
    """Parse each record once: fill what the manifest's columns hold (mode, mode step, tensor
    names, or why it is damaged) and, with `inline`, read one-element and small records and
    keep their values on the records (values of raw tensors up to `limit` bytes). Returns
    how many one-element values were inlined and how many small values were kept."""
    worth_seen: dict[tuple, bool] = {}
    wanted: list[tuple[StepIndex, Entry]] = []
    owners: list[mf.IndexRecord] = []  # the record of each wanted entry
    for r in records:
        try:
            si = parse_step_index(r.raw, r.key)
        except IndexReaderException as e:
            r.damage = e.reason if isinstance(e, IndexFileCorrupted) else e.message
            continue
        r.mode, r.mode_step = si.mode.value, si.mode_step
        r.names = tuple(sorted(si.names))
        r.entry_names = frozenset(si.entries)
        r.original_names = si.original_names
        if si.reductions:
            r.reduced = {n: frozenset(saved) for n, saved in si.reductions.items()}
            r.reduction_names = frozenset(e.get("tensorname") for saved in si.reductions.values()
                                          for e in saved.values())
        if not inline:
            continue
        for e in all_entries(si):
            name = e.get("tensorname")
            if not isinstance(name, str):
                continue
            # Entries of one tensor look alike from step to step: decide once per look.
            look = (name.startswith(REDUCTIONS_PREFIX), e.get("shape"), e.get("length"))
            try:
                worth = worth_seen.get(look)
            except TypeError:  # (a shape given as a list: not our layout)
                look, worth = None, None
            if worth is None:
                worth = _worth_reading(e, name, limit)
                if look is not None:
                    worth_seen[look] = worth
            if worth:
                wanted.append((si, e))
                owners.append(r)
    if not inline:
        return 0, 0
    inlined = kept = 0
    in_doc: dict[int, list[str]] = {id(r): [] for r in records if r.damage is None}
    values = read_small_values(storage, wanted)
    for r, (_, e), arr in zip(owners, wanted, values, strict=True):
        if arr is None:
            continue
        name = e["tensorname"]
        text = encode_inline(arr)
        if text is not None:
            r.inline[name] = text
            inlined += 1
            if e.get(INLINE_KEY) == text:
                in_doc[id(r)].append(name)
        elif name in r.entry_names and _keepable(arr, limit):
            r.values[name] = arr
            kept += 1
    for r in records:
        if r.damage is None:
            r.in_doc = frozenset(in_doc[id(r)])
    return inlined, kept


def _worth_reading(entry: dict, name: str, limit: int) -> bool:
    """Whether the entry's record may hold one value, or a value of at most `limit` bytes."""
    if name.startswith(REDUCTIONS_PREFIX):
        return True
    try:
        shape = entry_shape(entry)
    except ValueError:
        return False
    length = entry.get("length")
    if shape is not None and all(d == 1 for d in shape):
        return True
    if not isinstance(length, int):
        return False
    if limit <= 0:
        return shape is None and length <= _SMALL_RECORD
    # The shape bounds the elements (a byte at least each); the record's length their bytes.
    fits = shape is None or math.prod(shape) <= limit
    return fits and length <= max(limit + _RECORD_FRAMING, _SMALL_RECORD)


def _keepable(arr: np.ndarray, limit: int) -> bool:
    """A small numeric value the tensor sections can hold as its dtype and bytes."""
    return 0 < arr.nbytes <= limit and plain_numeric(arr.dtype)


def _remove_orphans(storage: Storage, m: mf.Manifest) -> None:
    """Chunks no head lists (left by an invalid or stale manifest) are deleted."""
    keep = {c.key for c in m.chunks}
    for k in storage.list(mf.CHUNK_DIR):
        if k.startswith(mf.CHUNK_DIR + "/") and k not in keep:
            try:
                storage.delete(k)
            except OSError:
                pass


def _finish(result: CompactionResult, m: mf.Manifest | None, storage: Storage,
            requests_before: int | None, started: float) -> None:
    result.manifest = m
    if m is not None and m.chunks:
        result.first_step, result.last_step, result.index_files = (m.first_step, m.last_step,
                                                                   m.files)
    if requests_before is not None:
        result.requests = getattr(storage, "requests", 0) - requests_before
    result.seconds = time.monotonic() - started
