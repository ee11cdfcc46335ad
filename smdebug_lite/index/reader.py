"""Reads a trial's index files incrementally: each poll lists only keys after a token.

smdebug re-listed and re-sorted the whole index tree on every call; here a poll lists from
`start_after` (the last step known to be complete, so files of lagging workers are still found),
skips keys already read and downloads the new ones together (concurrently on S3). Each file is
parsed into a `StepIndex` (`format.step_index`).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

from smdebug_lite.config.env_settings import env_bool
from smdebug_lite.exceptions import IndexFileCorrupted, IndexReaderException
from smdebug_lite.format import manifest as _manifest
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.format.locations import (
    COLLECTIONS_DIR,
    INDEX_DIR,
    index_file_name,
    index_group,
    parse_collections_file_name,
    parse_index_file_name,
    serialize_worker,
    step_dir_name,
)
from smdebug_lite.format.step_index import StepIndex, all_entries, parse_step_index
from smdebug_lite.index.compacted import CompactedIndex
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage

logger = get_logger(__name__)

RangeSteps = tuple[int | None, int | None]
T = TypeVar("T")


def _begin(pool: ThreadPoolExecutor | None, fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """`fn(*args)` started on `pool`, so that its request overlaps the caller's (remote
    storage), or made when its result is asked for (`pool` None: local storage, no thread)."""
    if pool is None:
        return lambda: fn(*args)
    return pool.submit(fn, *args).result


def _attach_inline(si: StepIndex, values: dict[str, str]) -> None:
    """A manifest's inlined values put into the entries they belong to (by tensor name)."""
    if si.reductions:  # reduction entries are not in `entries`: look at every entry
        _manifest.attach_inline(all_entries(si), values)
        return
    entries = si.entries
    key = INLINE_KEY
    for name, text in values.items():
        e = entries.get(name)
        if e is not None and text.__class__ is str:
            e[key] = text


def _step_index_of(record: _manifest.IndexRecord) -> StepIndex:
    """A manifest's index document parsed, with its inlined values in its entries."""
    si = parse_step_index(record.raw, record.key, (record.step, record.worker))
    if record.inline:
        _attach_inline(si, record.inline)
    return si


def step_in_range(range_steps: RangeSteps | None, step: int) -> bool:
    if range_steps is None:
        return True
    start, end = range_steps
    return (start is None or step >= start) and (end is None or step < end)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Bulk loading allocates many small containers that are never garbage; pausing the cyclic
    collector meanwhile avoids repeated full scans (it is restored afterwards)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


BULK_ENTRIES_FOR_COLLECT = 100_000


class bulk_load:  # noqa: N801 - used like a function: `with bulk_load() as bulk:`
    """Pauses the cyclic garbage collector while index files are parsed and added, and after a
    large load (`bulk.entries` counted by the caller) runs one full collection before resuming.

    Entries are JSON dicts holding only atomic values and shared shape tuples, but the JSON
    parser created them tracked by the collector, and only a full collection stops tracking
    them. Left alone, the young, middle and then full collections would each rescan the hundreds
    of thousands of new objects, wherever they happen to run in the user's program (about 0.1 s
    each for 250k entries); one collection here costs about one such scan, once.
    """

    def __init__(self) -> None:
        self.entries = 0
        self._was_enabled = False

    def __enter__(self) -> bulk_load:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            if self.entries >= BULK_ENTRIES_FOR_COLLECT:
                gc.collect()  # runs while the collector is still disabled: no scan before it
            gc.enable()


class IndexReader:
    def __init__(self, storage: Storage, range_steps: RangeSteps | None = None) -> None:
        self.storage = storage
        self.range_steps = range_steps
        self.start_after: str | None = None
        if range_steps is not None and range_steps[0]:
            # Keys of step `start` are '<start12>_<worker>.json', all greater than this.
            start = range_steps[0]
            self.start_after = f"{INDEX_DIR}/{index_group(start)}/{step_dir_name(start)}"
        self._seen: set[str] = set()
        self.files_read = 0
        self.bad_files: dict[str, str] = {}  # key -> why it was skipped
        # Index files found damaged since the trial last took them (`take_damaged`).
        self._damaged: list[IndexFileCorrupted] = []
        # The compacted index (format/manifest.py): used unless SMDEBUG_USE_MANIFEST=0 or it
        # fails a check.
        self.use_manifest = env_bool("SMDEBUG_USE_MANIFEST", True)
        self.manifest: _manifest.Manifest | None = None  # the one in use, once read
        self.manifest_docs = 0  # index documents taken from it
        self.manifest_chunks_read = 0
        self.manifest_problem: str | None = None  # why it was not used
        self.compacted: CompactedIndex | None = None  # the steps it covers, as columns
        self._compacted: CompactedIndex | None = None  # not yet taken by the trial
        self._manifest_checked = False

    def poll(self) -> list[StepIndex]:
        """Index files not read before, in key order (i.e. step order). The first poll takes
        the steps a valid manifest covers from its chunks (see `format/manifest.py`) and lists
        only the index files after them."""
        if not self._manifest_checked:
            self._manifest_checked = True
            if self.use_manifest:
                docs = self._poll_with_manifest()
                if docs is not None:
                    return docs
        keys, names = self._list_new()
        if not keys:
            return []
        try:
            texts: list[bytes | None] = list(self.storage.read_many(keys))
        except FileNotFoundError:
            texts = [self._read_or_none(k) for k in keys]
        docs = self._parse(keys, texts, names)
        self.files_read += len(docs)
        return docs

    def _list_new(self, listed: list[str] | None = None
                  ) -> tuple[list[str], dict[str, tuple[int, str]]]:
        """Index keys after the token not seen before, within the step range (`listed`: the
        listing after the token, already made)."""
        keys = []
        names: dict[str, tuple[int, str]] = {}
        if listed is None:
            listed = self.storage.list(INDEX_DIR, start_after=self.start_after)
        for key in listed:
            if key in self._seen or not key.startswith(INDEX_DIR + "/"):
                continue
            parsed = parse_index_file_name(key)
            if parsed is None:
                continue  # e.g. a writer's .tmp file
            if not step_in_range(self.range_steps, parsed[0]):
                self._seen.add(key)
                continue
            keys.append(key)
            names[key] = parsed
        return keys, names

    def _parse(self, keys: list[str], texts: list[bytes | None],
               names: dict[str, tuple[int, str]]) -> list[StepIndex]:
        return self._parse_each((key, text, names[key], None)
                                for key, text in zip(keys, texts, strict=True))

    def _parse_each(self, items: Iterable[tuple[str, bytes | None, tuple[int, str],
                                                dict[str, str] | None]]) -> list[StepIndex]:
        """Index documents as (key, text, (step, worker), inlined values or None), parsed as
        they come (a manifest's are inflated meanwhile); a damaged one is reported and left
        out."""
        docs = []
        with gc_paused():
            for key, text, parsed, inline in items:
                if text is None:
                    continue  # vanished between list and read; listed again next time
                self._seen.add(key)
                try:
                    si = parse_step_index(text, key, parsed)
                except IndexReaderException as e:
                    step, worker = parsed
                    reason = e.reason if isinstance(e, IndexFileCorrupted) else e.message
                    damage = IndexFileCorrupted(self.storage.uri(key), reason, step, worker)
                    self.bad_files[key] = str(damage)
                    self._damaged.append(damage)
                    logger.error("Skipping step %d of %s: %s", step, worker, damage)
                    continue
                if inline:
                    _attach_inline(si, inline)
                docs.append(si)
        return docs

    def _poll_with_manifest(self) -> list[StepIndex] | None:
        """The first poll over the manifest, or None (after a warning) when it is absent or
        fails a check: checksums, step ranges, the last compacted file unchanged, and no index
        file listed after it for a step it claims to cover. The steps it covers are not parsed
        here: they become `self.compacted` (columns, see `compacted.py`; the trial takes them
        with `take_compacted`); the index files after them are read and returned."""
        storage = self.storage
        # The head names what the next requests need: the chunks, the last index file they
        # cover and where listing resumes. On S3 those requests go together (the head's
        # round trip and theirs, instead of four in a row).
        with nullcontext() if storage.is_local else ThreadPoolExecutor(
                2, thread_name_prefix="smdebug-lite-manifest") as pool:
            try:
                m = _manifest.read_head(storage)
                if m is None or not m.chunks:
                    return None
                start, end = self.range_steps or (None, None)
                refs = [c for c in m.chunks if (end is None or c.first_step < end)
                        and (start is None or c.last_step >= start)]
                after = self.start_after
                if after is None or m.last_key > after:
                    after = m.last_key
                fresh = _begin(pool, _manifest.check_fresh, storage, m)
                listing = _begin(pool, storage.list, INDEX_DIR, after)
                compacted = CompactedIndex(storage, m, refs, self.range_steps, _step_index_of)
                fresh()
            except _manifest.ManifestInvalid as e:
                return self._manifest_unusable(str(e))
            listed = listing()
        saved = self.start_after, set(self._seen), dict(self.bad_files), len(self._damaged)
        self.start_after = after
        later, names = self._list_new(listed)
        last = m.last_step if m.last_step is not None else -1
        stale = [k for k in later if names[k][0] <= last]
        if stale:
            self._restore(saved)
            return self._manifest_unusable(f"stale: {stale[0]} was written after compaction "
                                           f"for a step the manifest covers (up to {last})")
        for key, reason, step, worker in compacted.damaged:
            damage = IndexFileCorrupted(storage.uri(key), reason, step, worker)
            self.bad_files[key] = str(damage)
            self._damaged.append(damage)
            logger.error("Skipping step %d of %s: %s", step, worker, damage)
        docs: list[StepIndex] = []
        if compacted.parse_at_open:
            # A short trial: every document parsed now, as its per-step files would be, and
            # held as the trial holds those (its first reads then cost what later ones do).
            try:
                docs = self._parse_each((r.key, r.raw, (r.step, r.worker), r.inline)
                                        for r in compacted.records())
            except _manifest.ManifestInvalid as e:
                self._restore(saved)
                return self._manifest_unusable(str(e))
        else:
            self.compacted = self._compacted = compacted
        self.manifest = m
        self.manifest_docs = len(compacted)
        self.manifest_chunks_read = len(refs)
        if later:
            try:
                later_texts: list[bytes | None] = list(storage.read_many(later))
            except FileNotFoundError:
                later_texts = [self._read_or_none(k) for k in later]
            more = self._parse(later, later_texts, names)
            self.files_read += len(more)
            docs += more
        return docs

    def take_compacted(self) -> CompactedIndex | None:
        """The steps the manifest covers, once (None before and after)."""
        found, self._compacted = self._compacted, None
        return found

    def _manifest_unusable(self, why: str) -> None:
        self.manifest_problem = why
        logger.warning("Not using the compacted index of %s (%s); reading the per-step index "
                       "files instead", self.storage.uri(), why)
        return None

    def _restore(self, saved: tuple[str | None, set[str], dict[str, str], int]) -> None:
        """Undo what using the manifest changed: the listing token, the keys seen and the
        damaged index files found in its chunks."""
        self.start_after, self._seen, self.bad_files, damaged = saved
        del self._damaged[damaged:]

    def take_damaged(self) -> list[IndexFileCorrupted]:
        """Index files found damaged since the last call (each is reported once)."""
        found, self._damaged = self._damaged, []
        return found

    def _read_or_none(self, key: str) -> bytes | None:
        try:
            return self.storage.read(key)
        except FileNotFoundError:
            return None

    def advance(self, last_complete_step: int, workers: set[str]) -> None:
        """Move the listing token to the last complete step; forget keys at or before it."""
        if last_complete_step < 0 or not workers:
            return
        last_worker = max(serialize_worker(w) for w in workers)
        token = index_file_name(last_complete_step, last_worker)
        if self.start_after is None or token > self.start_after:
            self.start_after = token
            self._seen = {k for k in self._seen if k > token}

    def collection_files(self) -> list[str]:
        """Sorted keys of collections files (one per writing worker)."""
        return [
            k for k in self.storage.list(COLLECTIONS_DIR)
            if parse_collections_file_name(k) is not None
        ]
