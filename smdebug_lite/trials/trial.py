"""`Trial`: the saved tensors of one training job, read from a local directory or S3 prefix.

The trial keeps a `StepTable` built from index files and extends it incrementally on refresh:
a refresh lists only index keys after the last complete step and reads only the new files. A
query refreshes only when the data may have changed (training not ended, refresh enabled), at
most every `refresh_interval_s` unless it asks for something not known yet (a "miss"), which
always refreshes. Once `training_job_end.ts` is seen (and, with several workers, their steps
are complete or a grace period has passed), everything is loaded and the trial never lists again.

Step completeness follows smdebug: a step is complete when every worker wrote it, when training
has ended, or when it is at or below `last_complete_step`.
"""

from __future__ import annotations

import bisect
import os
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from smdebug_lite.analysis.utils import _tensor_name_sorter, refresh
from smdebug_lite.config import Collection, CollectionKeys, CollectionManager
from smdebug_lite.config.arguments import as_mode
from smdebug_lite.exceptions import (
    CollectionsFileDamaged,
    JSONFileRejected,
    MissingCollectionFiles,
    NoMoreData,
    SMDebugTypeError,
    SMDebugValueError,
    StepUnavailable,
    TensorUnavailable,
    TrialDataTimeout,
)
from smdebug_lite.format import bounded_json
from smdebug_lite.format.locations import END_OF_JOB_FILE, parse_collections_file_name
from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.index import IndexReader, RangeSteps, StepIndex, bulk_load, gc_paused
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import Storage
from smdebug_lite.trials.arguments import check_name, check_optional_step, check_step
from smdebug_lite.trials.non_finite import NonFiniteRecords
from smdebug_lite.trials.settings import TrialSettings
from smdebug_lite.trials.step_table import StepState, StepTable
from smdebug_lite.trials.tensor import Tensor
from smdebug_lite.trials.value_fetch import ValueFetcher
from smdebug_lite.trials.value_reader import ValueReader

logger = get_logger(__name__)
GLOBAL = ModeKeys.GLOBAL


def check_range_steps(range_steps: Any) -> RangeSteps | None:
    """(start, end): ints >= 0 or None, start < end; start inclusive, end exclusive."""
    if range_steps is None:
        return None
    if not isinstance(range_steps, (tuple, list)) or len(range_steps) != 2:
        raise SMDebugValueError(f"range_steps={range_steps!r} must be a (start, end) pair")
    start, end = range_steps
    for v in (start, end):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise SMDebugValueError(
                f"range_steps={range_steps!r}: each bound must be None or an int >= 0"
            )
    if start is not None and end is not None and end <= start:
        raise SMDebugValueError(
            f"range_steps={range_steps!r} must be of the form (begin, end) with begin < end"
        )
    return (start, end)


class Trial:
    """The saved tensors of one job. Use `create_trial(path)` rather than this class directly.

    Public attributes as in smdebug: `name`, `path`, `range_steps`, `num_workers`, `worker_set`,
    `loaded_all_steps`, `last_complete_step`, `dynamic_refresh`, `collection_manager` (and
    `_global_to_mode`, which published rule code reads). `step_table` is the step/worker/mode
    index that `Tensor` looks steps up in; `value_fetcher` reads their values.
    """

    def __init__(
        self,
        name: str,
        storage: Storage,
        range_steps: RangeSteps | None = None,
        *,
        timeout: float | None = None,
        parallel: bool = True,
        check: bool = False,
        index_mode: bool = True,
        cache: bool = False,
    ) -> None:
        self.name = name
        self.storage = storage
        self.path = storage.root
        self.range_steps = check_range_steps(range_steps)
        self.settings = TrialSettings.from_env(storage.is_local, timeout)
        if hasattr(storage, "retry_budget_s"):  # S3: retrying a request is a wait too
            storage.retry_budget_s = self.settings.timeout_s
        # Accepted for smdebug compatibility; values are always cached by file here.
        self.parallel, self.check, self.index_mode, self.cache = parallel, check, index_mode, cache
        self.dynamic_refresh = True
        self.collection_manager: CollectionManager | None = None
        self.step_table = StepTable()

        self._tensors: dict[str, Tensor] = {}
        self._last_refresh = 0.0
        self._end_seen_at: float | None = None
        self._last_new_data = 0.0
        self._index = IndexReader(storage, self.range_steps)
        self._values = ValueReader(storage)
        self._non_finite = NonFiniteRecords(storage)
        self.value_fetcher = ValueFetcher(self._values, self.step_table, self.settings, storage,
                                          self._training_ended)

        logger.info("Loading trial %s at path %s", name, self.path)
        self._load_collections()
        self.refresh_data()

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} name={self.name!r} path={self.path!r} "
            f"steps={len(self.step_table)} tensors={len(self._tensors)} "
            f"workers={self.num_workers} loaded_all_steps={self.loaded_all_steps}>"
        )

    # -- smdebug's attributes, kept in the step table ---------------------------------------

    @property
    def num_workers(self) -> int:
        return self.step_table.num_workers

    @num_workers.setter
    def num_workers(self, value: int) -> None:
        self.step_table.num_workers = value

    @property
    def worker_set(self) -> set[str]:
        """Workers named by the collections files."""
        return self.step_table.expected_workers

    @worker_set.setter
    def worker_set(self, value: set[str]) -> None:
        self.step_table.expected_workers = set(value)

    @property
    def last_complete_step(self) -> int:
        return self.step_table.last_complete_step

    @last_complete_step.setter
    def last_complete_step(self, value: int) -> None:
        self.step_table.set_last_complete_step(value)

    @property
    def loaded_all_steps(self) -> bool:
        return self.step_table.all_loaded

    @loaded_all_steps.setter
    def loaded_all_steps(self, value: bool) -> None:
        self.step_table.set_all_loaded(bool(value))

    @property
    def _global_to_mode(self) -> dict[int, tuple[ModeKeys, int]]:
        """smdebug's map global step -> (mode, mode step): published rules read it."""
        return self.step_table.global_to_mode

    @property
    def last_index_token(self) -> str | None:
        """The index file after which the next refresh lists, named as smdebug named it: the
        trial's directory (local) or S3 prefix joined with the key under the trial."""
        token = self._index.start_after
        return None if token is None else self._index_token_root() + token

    def _index_token_root(self) -> str:
        return self.path.rstrip("/") + "/"

    # -- loading ---------------------------------------------------------------------------

    def _training_ended(self) -> bool:
        return self.step_table.all_loaded or self.storage.exists(END_OF_JOB_FILE)

    def _deadline_passed(self, started: float, what: str) -> None:
        waited = self.settings.waited_too_long(started)
        if waited is not None:
            raise TrialDataTimeout(self.path, waited, what)

    def _read_collections(self, key: str) -> CollectionManager:
        """A collections file, parsed within bounded_json's limits; CollectionsFileDamaged
        names it when it is not a collections document."""
        uri = self.storage.uri(key)
        try:
            params = bounded_json.loads(self.storage.read(key), uri)
            return CollectionManager.from_dict(params, source=uri)
        except JSONFileRejected as e:
            raise CollectionsFileDamaged(uri, e.reason) from None
        except (SMDebugValueError, TypeError, KeyError, AttributeError) as e:
            reason = str(e)
            if reason.startswith(uri + ": "):
                reason = reason[len(uri) + 2:]
            raise CollectionsFileDamaged(uri, reason) from None

    def _load_collections(self) -> None:
        """Wait (bounded) for the collections files: the first gives num_workers, then one per
        worker is expected."""
        started = time.monotonic()
        files = self._index.collection_files()
        while not files:
            if self.storage.exists(END_OF_JOB_FILE):
                files = self._index.collection_files()
                if files:
                    break
                raise MissingCollectionFiles(
                    f"training ended without writing any collections file under {self.path}"
                )
            self._deadline_passed(started, "collection files")
            if time.monotonic() - started < self.settings.poll_interval_s * 1.5:
                logger.info("Waiting for the training job to write collection files under %s "
                            "(timeout %.0fs)", self.path, self.settings.timeout_s)
            self.settings.pause(started)
            files = self._index.collection_files()
        self.collection_manager = self._read_collections(files[0])
        self.num_workers = self.collection_manager.num_workers
        while len(files) < self.num_workers:
            if self.storage.exists(END_OF_JOB_FILE):
                files = self._index.collection_files()
                if len(files) < self.num_workers:
                    raise MissingCollectionFiles(
                        f"found {len(files)} of {self.num_workers} workers' collections files "
                        f"under {self.path}"
                    )
                break
            self._deadline_passed(started, f"collection files of all {self.num_workers} workers")
            self.settings.pause(started)
            files = self._index.collection_files()
        self.worker_set = {w for w in map(parse_collections_file_name, files) if w is not None}

    def maybe_refresh(self, name: str | None = None, *, force: bool = False) -> None:
        """Load new index files unless refreshing is off or everything is loaded.

        `force` (a query that missed) skips the rate limit, not the `dynamic_refresh` switch.
        """
        if self.step_table.all_loaded or not self.dynamic_refresh:
            return
        if not force and time.monotonic() - self._last_refresh < self.settings.refresh_interval_s:
            return
        self.refresh_data()

    def refresh_tensor(self, tname: str, steps: Iterable[int] | None = None) -> None:
        """smdebug's per-tensor refresh: as there, it reads every new index file."""
        self.refresh_data()

    def refresh_data(self) -> None:
        """Read index files written since the last refresh."""
        if self.step_table.all_loaded:
            return
        # The end marker is checked before listing: writers create it after all their files,
        # so a listing made after seeing it holds everything of the worker that wrote it.
        ended = self.storage.exists(END_OF_JOB_FILE)
        now = time.monotonic()
        with bulk_load() as bulk:
            docs = self._poll()
            bulk.entries = sum(si.tracked for si in docs)
            if self._ingest(docs):
                self._last_new_data = now
        if ended:
            if self._end_seen_at is None:
                self._end_seen_at = now
                delay = min(self.settings.end_delay_refresh_s, self.settings.timeout_s)
                if delay > 0:
                    logger.info("Training has ended; refreshing once more in %.1fs", delay)
                    time.sleep(delay)
                    self._ingest(self._poll())
            # Every worker writes the marker when it finishes, so with several workers it can
            # appear while others still write. Wait (bounded) for incomplete steps to fill in.
            quiet = now - max(self._end_seen_at, self._last_new_data)
            table = self.step_table
            if table.max_step <= table.last_complete_step or quiet >= self.settings.end_grace_s:
                table.mark_all_loaded()
                logger.debug("Loaded all steps of trial %s", self.name)
        self._last_refresh = time.monotonic()

    def _poll(self) -> list[StepIndex]:
        docs = self._index.poll()
        compacted = self._index.take_compacted()
        if compacted is not None:  # the steps a manifest covers, as columns
            for name in compacted.all_names() - self._tensors.keys():
                self._tensors[name] = Tensor(name, self)
            for _, originals in compacted.original_names:
                for name, original in originals.items():
                    self._tensors[name].original_name = original
            self.step_table.add_compacted(compacted)
            self._last_new_data = time.monotonic()
            self._advance_token()
        for damage in self._index.take_damaged():
            self.step_table.add_damage(damage)
        return docs

    def _ingest(self, docs: list[StepIndex]) -> bool:
        if not docs:
            return False
        with gc_paused():
            tensors = self._tensors
            add = self.step_table.add
            last = None
            for si in docs:
                names = si.names
                if names is last and not si.original_names:  # the same names: one shared set
                    add(si)
                    continue
                last = names
                keys = names.keys() if isinstance(names, dict) else names
                if not keys <= tensors.keys():  # usually the same tensors as the step before
                    for name in keys - tensors.keys():
                        tensors[name] = Tensor(name, self)
                if si.original_names:
                    for name, original in si.original_names.items():
                        tensors[name].original_name = original
                add(si)
        self._advance_token()
        return True

    def _advance_token(self) -> None:
        window = self.settings.incomplete_step_window
        table = self.step_table
        lcs = table.last_complete_step
        if len(table) - (lcs + 1) > window:
            pending = table.incomplete_steps()
            if len(pending) > window:
                table.set_last_complete_step(pending[window // 2 - 1])
                logger.info(
                    "Waiting for %d incomplete steps (SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW=%d); "
                    "marking steps up to %d complete", len(pending), window,
                    table.last_complete_step)
        self._index.advance(table.last_complete_step, table.all_workers())

    # -- public API: tensors ---------------------------------------------------------------

    def tensor(self, tname: str) -> Tensor:
        t = self._tensors.get(tname) if tname.__class__ is str else None
        if t is None:
            check_name(tname, "tname", "a tensor name, see trial.tensor_names()")
            self.maybe_refresh(tname, force=True)
            t = self._tensors.get(tname)
            if t is None:
                raise TensorUnavailable(tname)
        return t

    def has_tensor(self, tname: str) -> bool:
        check_name(tname, "tname", "a tensor name, see trial.tensor_names()")
        if tname not in self._tensors:
            self.maybe_refresh(tname, force=True)
        return tname in self._tensors

    def _tensors_matching_regex(self, regex: str | Iterable[str], names: Iterable[str]) -> set[str]:
        patterns = [regex] if isinstance(regex, str) else list(regex)
        try:
            compiled = [re.compile(p) for p in patterns]
        except (re.error, TypeError) as e:
            raise SMDebugValueError(f"regex={regex!r} is not a valid regex or list of them: {e}") from None
        return {n for n in names if any(p.search(n) for p in compiled)}

    def _collection_arg(self, collection: Any) -> Collection:
        if isinstance(collection, Collection):
            return collection
        if isinstance(collection, str):
            return self.collection(collection)
        name = getattr(collection, "name", None)
        if isinstance(name, str):  # e.g. a Collection from another library
            return self.collection(name)
        raise SMDebugTypeError(f"Invalid argument type for collection {collection.__class__}")

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeKeys = GLOBAL,
        regex: str | list[str] | None = None,
        collection: Collection | str | None = None,
    ) -> list[str]:
        """Sorted names of saved tensors, optionally only those at a step / of a mode /
        matching a regex (re.search) / in a collection. Reductions count as their tensor."""
        if regex is not None and collection is not None:
            raise ValueError("Only one of `regex` or `collection` can be passed to this method")
        mode = as_mode(mode)
        step = check_optional_step(step)
        self.maybe_refresh()
        table = self.step_table
        if step is None:
            names: Iterable[str] = (
                self._tensors.keys() if mode is GLOBAL else table.names_of_mode(mode)
            )
        else:
            gs = table.global_step(mode, step)
            if gs is None or table.holders(gs) is None:
                self.maybe_refresh(force=True)
                gs = table.global_step(mode, step)
            names = set()
            held = table.holders(gs) if gs is not None else None
            for si in held.values() if held else ():
                names.update(si.names)
            damage = table.damage_at(step, mode)
            if damage is not None:  # the answer would be missing the damaged file's names
                raise damage
        if regex is not None:
            selected = self._tensors_matching_regex(regex, names)
            if not selected:
                logger.warning("No tensors matching the regex pattern %s were saved", regex)
        elif collection is not None:
            coll = self._collection_arg(collection)
            selected = {n for n in names if coll.matches(n)}
            if not selected:
                logger.warning("No tensors from the collection %s were saved", coll.name)
        else:
            selected = set(names)
        return sorted(selected)

    def step_values(self, step: int, names: Sequence[str], mode: ModeKeys = GLOBAL
                    ) -> list[np.ndarray | None]:
        """The raw values of `names` at one step, read together, with the event files of the
        steps after it fetched ahead in one batch when this step's is not in memory (a rule
        reads many tensors of one step, step after step). Each is what `Tensor.value` returns;
        None where that would do more than read the record (several workers, a manifest, no
        raw value, a file not there yet, damage to explain), which is left to it."""
        mode = as_mode(mode)
        step = check_step(step)
        out: list[np.ndarray | None] = [None] * len(names)
        table = self.step_table
        if table.num_workers > 1 or table.compacted is not None:
            return out
        si = table.only(mode, step)
        if si is None:
            return out
        reader = self.value_fetcher.reader
        steps_ahead, max_bytes = self.value_fetcher.ahead  # SMDEBUG_READER_AHEAD_*
        if steps_ahead and not reader.holds(si):
            steps = self.steps(mode=mode)
            pos = bisect.bisect_left(steps, step)
            ahead = (table.only(mode, s) for s in steps[pos : pos + steps_ahead])
            reader.read_files([a for a in ahead if a is not None], max_bytes)
        entries, held, read = si.entries, si.names, reader.read
        for i, name in enumerate(names):
            entry = entries.get(name)
            if entry is None or name not in held:
                continue
            try:
                out[i] = read(si, entry)
            except Exception:  # noqa: BLE001 - Tensor.value reads it again and explains
                continue
        return out

    def has_saved_reduction(self, step: int, reduction: str, abs: bool = False,
                            mode: ModeKeys = GLOBAL) -> bool:
        """Whether any worker saved `reduction` (with `abs`) of any tensor at the step, from
        the index alone (False for a step not known): a rule that prefers saved reductions
        where there are some asks once per step rather than once per tensor."""
        mode = as_mode(mode)
        step = check_step(step)
        table = self.step_table
        gs = table.global_step(mode, step)
        held = table.holders(gs) if gs is not None else None
        key = (reduction, bool(abs))
        for si in held.values() if held else ():
            if si.reductions and any(key in saved for saved in si.reductions.values()):
                return True
        return False

    def tensors(self, *args: Any, **kwargs: Any) -> list[str]:
        """Alias of tensor_names (used by smdebug's rule examples)."""
        return self.tensor_names(*args, **kwargs)

    def _values_by_names(self, names: list[str], step: int, mode: ModeKeys) -> list[np.ndarray]:
        return [self.tensor(n).value(step, mode=mode) for n in sorted(names, key=_tensor_name_sorter)]

    def inputs(self, step: int, mode: ModeKeys = GLOBAL) -> list[np.ndarray]:
        step = check_step(step)
        names = self.tensor_names(step=step, mode=mode, collection=CollectionKeys.INPUTS)
        return self._values_by_names(names, step, as_mode(mode))

    def labels(self, step: int, mode: ModeKeys = GLOBAL) -> list[np.ndarray]:
        step = check_step(step)
        return self._values_by_names(self.tensor_names(step=step, mode=mode, regex="labels*"),
                                     step, as_mode(mode))

    def predictions(self, step: int, mode: ModeKeys = GLOBAL) -> list[np.ndarray]:
        step = check_step(step)
        return self._values_by_names(self.tensor_names(step=step, mode=mode, regex="predictions*"),
                                     step, as_mode(mode))

    # -- public API: steps and modes -------------------------------------------------------

    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Sorted saved steps (mode steps for a mode); complete ones unless asked otherwise."""
        mode = as_mode(mode)
        self.maybe_refresh()
        table = self.step_table
        return table.select(table.global_to_mode, mode, show_incomplete_steps)[0]

    def modes(self) -> list[ModeKeys]:
        """Modes seen so far (GLOBAL is never listed)."""
        self.maybe_refresh()
        return self.step_table.modes()

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        mode = as_mode(mode)
        mode_step = check_step(mode_step, "mode_step")
        s = self.step_table.global_step(mode, mode_step)
        if s is None:
            self.maybe_refresh(force=True)
            s = self.step_table.global_step(mode, mode_step)
        return s

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        if global_step.__class__ is not int:
            global_step = check_step(global_step, "global_step")
        g2m = self.step_table.global_to_mode
        x = g2m.get(global_step)
        if x is None:
            self.maybe_refresh(force=True)
            x = g2m.get(global_step)
        return x if x is not None else (None, None)

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    def workers(self) -> list[str]:
        self.maybe_refresh()
        return sorted(self.step_table.all_workers())

    def collections(self) -> dict[str, Collection]:
        assert self.collection_manager is not None
        return self.collection_manager.collections

    def collection(self, coll_name: str) -> Collection:
        """The named collection; like smdebug, an unknown name gets a new empty collection."""
        assert self.collection_manager is not None
        return self.collection_manager.get(coll_name, create_if_not_exists=True)

    def has_passed_step(self, step: int, mode: ModeKeys = GLOBAL) -> StepState:
        """AVAILABLE (saved and complete), NOT_YET_AVAILABLE (may still come or complete) or
        UNAVAILABLE (never saved, and never will be)."""
        mode = as_mode(mode)
        step = check_step(step)
        self.maybe_refresh()
        table = self.step_table
        all_steps, gsteps = table.select(table.global_to_mode, mode, True)
        i = bisect.bisect_left(all_steps, step)
        if i < len(all_steps):
            g = gsteps[i]
            if all_steps[i] > step:
                # Skipped: a later step is complete, so this one will never be written.
                if table.last_complete_step >= g:
                    return StepState.UNAVAILABLE
                return StepState.NOT_YET_AVAILABLE
            return StepState.AVAILABLE if table.is_complete(g) else StepState.NOT_YET_AVAILABLE
        return StepState.UNAVAILABLE if table.all_loaded else StepState.NOT_YET_AVAILABLE

    def wait_for_steps(self, required_steps: Iterable[int], mode: ModeKeys = GLOBAL,
                       timeout: float | None = None) -> None:
        """Return once every step is available; StepUnavailable / NoMoreData when one never
        will be, TrialDataTimeout after `timeout` (default: the trial's) seconds; a step whose
        index file is damaged raises its IndexFileCorrupted."""
        mode = as_mode(mode)
        if isinstance(required_steps, (str, bytes)) or not isinstance(required_steps, Iterable):
            raise SMDebugTypeError(
                f"required_steps={required_steps!r} must be an iterable of step numbers")
        steps = [check_step(s, "required_steps item") for s in required_steps]
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, (int, float)) or timeout < 0):
            raise SMDebugValueError(f"timeout={timeout!r} must be a non-negative number of seconds")
        limit = self.settings.timeout_s if timeout is None else float(timeout)
        started = time.monotonic()
        with refresh(self):
            for step in steps:
                while True:
                    self.maybe_refresh(force=True)
                    state = self.has_passed_step(step, mode)
                    if state is StepState.AVAILABLE:
                        break
                    damage = self.step_table.damage_at(step, mode)
                    if damage is not None:
                        raise damage
                    if state is StepState.UNAVAILABLE:
                        if not self.loaded_all_steps:
                            raise StepUnavailable(step, mode)
                        avail = self.step_table.all_steps(mode)
                        last = avail[-1] if avail else -1
                        if step < last:
                            raise StepUnavailable(step, mode)
                        raise NoMoreData(step, mode, last)
                    waited = time.monotonic() - started
                    if waited >= limit:
                        mode_name = mode.name if mode is not None else None
                        raise TrialDataTimeout(self.path, waited, f"step {step} of mode {mode_name}"
                                               f" (trial {self.name!r})")
                    time.sleep(min(self.settings.poll_interval_s, max(0.0, limit - waited)))

    # -- public API: where values first went non-finite ----------------------------------

    def non_finite_records(self) -> list[NonFiniteRecord]:
        """Where each worker first met a NaN or Inf, earliest (step, worker) first: the records
        under ``non_finite/`` (`smdebug_lite.format.non_finite`); [] when none was written.
        NonFiniteRecordDamaged names a file that is not a record."""
        self._poll_non_finite()
        return self._non_finite.records()

    def first_non_finite(self) -> NonFiniteRecord | None:
        """The earliest record by (step, worker), or None."""
        records = self.non_finite_records()
        return records[0] if records else None

    def _poll_non_finite(self) -> None:
        """Records are listed as often as steps are refreshed: at most every refresh interval
        while training runs, not while refreshing is off (once read), and once more after
        every step was loaded; then never again."""
        found = self._non_finite
        if found.final:
            return
        self.maybe_refresh()
        if found.polls and not self.dynamic_refresh:
            return
        now = time.monotonic()
        ended = self.step_table.all_loaded
        if found.polls and not ended and now - found.last_poll < self.settings.refresh_interval_s:
            return
        found.poll(now)
        found.final = ended

    # -- stats -----------------------------------------------------------------------------

    @property
    def index_files_read(self) -> int:
        return self._index.files_read

    @property
    def event_file_reads(self) -> int:
        return self._values.file_reads + self._values.range_reads

    # -- as a table (smdebug_lite.table; needs the 'export' extra) ---------------------------

    def to_pandas(self, **selection: Any) -> Any:
        """The trial as a long-format DataFrame (columns: smdebug_lite.table.COLUMNS)."""
        from smdebug_lite.table import to_pandas

        return to_pandas(self, **selection)

    def to_arrow(self, **selection: Any) -> Any:
        """The trial as a long-format pyarrow Table (columns: smdebug_lite.table.COLUMNS)."""
        from smdebug_lite.table import to_arrow

        return to_arrow(self, **selection)


def default_trial_name(path: str) -> str:
    return os.path.basename(path.rstrip("/")) if path.rstrip("/") else path
