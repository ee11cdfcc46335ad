"""`Tensor`: one tensor name of a trial, across steps, modes and workers.

A tensor holds no per-step objects of its own: the trial's `StepTable` keeps one `StepIndex`
per (step, worker) and a tensor looks itself up there. Its list of steps is computed once per
refresh. Values come through the trial's `ValueFetcher`.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from smdebug_lite.config.arguments import as_mode
from smdebug_lite.config.reductions import check_reduction_name, compute_reduction
from smdebug_lite.exceptions import (
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    SMDebugError,
    SMDebugNotImplementedError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailableForStep,
)
from smdebug_lite.format.tensor_codec import WIDENED_FROM
from smdebug_lite.index import INLINE_KEY, StepIndex, entry_shape, gc_paused
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials.arguments import check_name, check_optional_step, check_step, check_worker
from smdebug_lite.trials.read_ahead import ReadAhead
from smdebug_lite.trials.step_table import StepState
from smdebug_lite.trials.value_reader import NoRawValue

if TYPE_CHECKING:
    from smdebug_lite.trials.trial import Trial

GLOBAL = ModeKeys.GLOBAL
__all__ = ["StepState", "Tensor", "as_mode"]  # StepState and as_mode: their old home


class Tensor:
    def __init__(self, name: str, trial: Trial, cache: bool = False) -> None:
        # `cache` is smdebug's argument; values are always cached per event file here.
        self.name = name
        self.original_name: str | None = None
        self.trial = trial
        self._table = trial.step_table
        self._fetch = trial.value_fetcher
        # One stored value; on FileNotFoundError the callers go on with `_fetch.wait_for`.
        self._read = trial.value_fetcher.read
        # A reduction computed from the stored value (kept, and batched over steps).
        self._reduce = trial.value_fetcher.reader.reduction
        self._gsteps: list[int] = []
        self._scanned = 0  # how many of the trial's index files _gsteps covers
        # (mode, show_incomplete) -> (table version, (steps, global steps)) of the last query
        self._selected: dict[tuple[ModeKeys | None, bool], tuple[int, tuple[list, list]]] = {}
        # Step-by-step reads fetched ahead (`read_ahead`); None when switched off.
        ahead_steps, ahead_bytes = trial.value_fetcher.ahead
        self._ahead = ReadAhead(ahead_steps, ahead_bytes) if ahead_steps else None

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} of trial {self.trial.name!r}>"

    # -- steps -----------------------------------------------------------------------------

    def _global_steps(self) -> list[int]:
        """Sorted global steps with anything of this tensor (do not modify the list).

        Extended incrementally: only index files added since the last call are looked at."""
        table = self._table
        n = table.index_count
        if self._scanned < n:
            name = self.name
            found = sorted(set(table.steps_holding(name, self._scanned)))
            steps = self._gsteps
            if not steps or (found and found[0] > steps[-1]):
                steps.extend(found)
            elif found:  # a lagging worker's older step, or a step seen from another worker
                steps[:] = sorted(set(steps).union(found))
            self._scanned = n
        return self._gsteps

    def steps(self, mode: ModeKeys = GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Steps (mode steps for a mode) at which anything of this tensor was saved.

        Without show_incomplete_steps only steps every worker has written (or that can no
        longer change) are listed.
        """
        mode = as_mode(mode)
        self.trial.maybe_refresh()
        return list(self._select(mode, bool(show_incomplete_steps))[0])

    def _select(self, mode: ModeKeys | None, show_incomplete: bool) -> tuple[list, list]:
        """(mode steps, global steps) of this tensor, as `StepTable.select` gives them; kept
        until the table changes (do not modify the lists)."""
        key = (mode, show_incomplete)
        version = self._table.version
        hit = self._selected.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        found = self._table.select(self._global_steps(), mode, show_incomplete)  # type: ignore[arg-type]
        self._selected[key] = (version, found)
        return found

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = GLOBAL) -> list[int]:
        """The saved steps up to and including `step`; only the last `n` when n is given."""
        step = check_step(step)
        n = check_optional_step(n, "n")
        steps = self.steps(mode=mode)
        prev = steps[: bisect.bisect_right(steps, step)]
        return prev[-n:] if n else prev

    def step(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None):
        raise SMDebugNotImplementedError(
            "Tensor.step() was removed from smdebug; use Tensor.value() or Tensor.reduction_value()"
        )

    # -- looking a step up -----------------------------------------------------------------

    def _holders(self, step: int, mode: ModeKeys) -> tuple[dict[str, StepIndex], int] | None:
        """{worker: StepIndex} of the workers that saved this tensor at the step."""
        gs = self._table.global_step(mode, step)
        if gs is None:
            return None
        by_worker = self._table.holders(gs)
        if not by_worker:
            return None
        name = self.name
        held = {w: si for w, si in by_worker.items() if name in si.names}
        return (held, gs) if held else None

    def _missing_step(self, step: int, mode: ModeKeys) -> Exception:
        """The exception for a step this tensor has nothing for, after a refresh: the damage of
        an index file that may hold it, else why it is not there."""
        trial = self.trial
        damage = self._table.damage_at(step, mode)
        if damage is not None:
            return damage
        state = trial.has_passed_step(step, mode)
        if state is StepState.AVAILABLE:
            return TensorUnavailableForStep(self.name, step, mode)
        if state is StepState.UNAVAILABLE:
            return StepUnavailable(step, mode)
        if trial.loaded_all_steps:
            last = trial.steps(mode=mode)
            return NoMoreData(step, mode, last[-1] if last else -1)
        return StepNotYetAvailable(step, mode)

    def _lookup(self, step: int, mode: ModeKeys) -> tuple[dict[str, StepIndex], int]:
        found = self._holders(step, mode)
        if found is None:
            self.trial.maybe_refresh(force=True)
            found = self._holders(step, mode)
            if found is None:
                raise self._missing_step(step, mode)
        return found

    def _pick(self, held: dict[str, StepIndex], gs: int, step: int, mode: ModeKeys,
              worker: str | None) -> StepIndex:
        """The StepIndex to answer from: the given worker's, else the lexically first."""
        trial, table = self.trial, self._table
        if worker is not None:
            si = held.get(worker)
            if si is not None:
                return si
            if worker not in table.all_workers():
                raise InvalidWorker(worker)
            if not table.is_complete(gs):
                trial.maybe_refresh(force=True)
                si = (table.holders(gs) or {}).get(worker)
                if si is not None and self.name in si.names:
                    return si
            damage = table.damage_at(gs, GLOBAL, worker)
            if damage is not None:
                raise damage
            if not table.is_complete(gs):
                raise StepNotYetAvailable(step, mode)
            raise TensorUnavailableForStep(self.name, step, mode)
        if len(held) == 1 and table.num_workers <= 1:
            return next(iter(held.values()))
        if table.is_complete(gs):
            return held[min(held)]
        # An incomplete step: answer only from the worker a complete step would answer from,
        # so the result cannot change when the other workers catch up.
        first = min(table.all_workers())
        if first not in held:
            trial.maybe_refresh(force=True)
            refreshed = self._holders(step, mode)
            if refreshed is not None:
                held = refreshed[0]
                if table.is_complete(gs):
                    return held[min(held)]
            if first not in held:
                raise StepNotYetAvailable(step, mode)
        return held[first]

    def _step_index(self, step: int, mode: ModeKeys, worker: str | None) -> StepIndex:
        table = self._table
        if table.num_workers <= 1:
            # Fast path: one writer (named or not), a known step that holds this tensor.
            si = table.only(mode, step)
            if si is not None and self.name in si.names and worker in (None, si.worker):
                return si
        held, gs = self._lookup(step, mode)
        return self._pick(held, gs, step, mode, worker)

    # -- values ----------------------------------------------------------------------------

    def _no_value(self, si: StepIndex, step: int, mode: ModeKeys) -> TensorUnavailableForStep:
        return TensorUnavailableForStep(self.name, step, mode,
                                        bool(si.reductions and self.name in si.reductions))

    def value(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> np.ndarray:
        """The saved array at a step (a mode step when mode is given)."""
        if mode.__class__ is not ModeKeys:
            mode = as_mode(mode)
        if step_num.__class__ is not int:
            step_num = check_step(step_num, "step_num")
        if worker is not None:
            worker = check_worker(worker)
        table = self._table
        one = worker is None and table.num_workers <= 1
        if one and table.compacted is not None:
            # A small value a manifest holds in the tensor's section: no document parsed.
            found = table.section_value(self.name, mode, step_num)
            if found is not None:
                return found
        # The usual case inline (one writer, a known step holding this tensor): `_step_index`.
        si = table.only(mode, step_num) if one else None
        if si is None or self.name not in si.names:
            si = self._step_index(step_num, mode, worker)
        entry = si.entries.get(self.name)
        if entry is None:
            raise self._no_value(si, step_num, mode)
        ahead = self._ahead
        if ahead is not None and INLINE_KEY not in entry:
            run = ahead.current
            if run.last < step_num <= run.until and run.mode is mode \
                    and run.worker == worker and run.saved is None:
                run.last = step_num  # inside the window fetched ahead
            else:
                self._read_ahead(step_num, mode, worker, None)
        try:
            return self._read(si, entry)
        except FileNotFoundError:
            return self._fetch.wait_for(si, entry, self.name)

    def _read_ahead(self, step: int, mode: ModeKeys, worker: str | None,
                    saved: tuple[str, bool] | None) -> None:
        """Before a read of `step`: when it continues a run of consecutive steps, the records
        of the next steps (the raw value, or the saved reduction `saved`) are fetched in one
        batch (`read_ahead`)."""
        ahead = self._ahead
        key = (mode, worker, saved)
        pos = ahead.due(step, key, lambda: self._select(mode, False)[0])  # type: ignore[union-attr]
        if pos is None:
            return
        steps, gsteps = self._select(mode, False)
        end = pos + ahead.steps  # type: ignore[union-attr]
        steps, gsteps = steps[pos:end], gsteps[pos:end]
        ahead.fetched(key, steps[-1])  # type: ignore[union-attr]
        try:
            sis, one_worker = self._sources(steps, gsteps, mode, worker)
        except (SMDebugError, LookupError):
            return  # a step the reads themselves will explain
        name = self.name
        picked: list[StepIndex] = []
        budget = ahead.max_bytes  # type: ignore[union-attr]
        for k, si in enumerate(sis):
            if saved is None:
                entry = si.entries.get(name)
            else:
                entry = (si.reductions or {}).get(name, {}).get(saved)
            if entry is None or INLINE_KEY in entry:
                continue
            length = entry.get("length")
            budget -= length if length.__class__ is int else 0
            if budget < 0 and picked:
                ahead.fetched(key, steps[k - 1])  # type: ignore[union-attr]
                break
            picked.append(si)
        if len(picked) < 2:
            return
        if saved is None:
            self._fetch.prefetch(picked, name, one_worker)
        else:
            self._fetch.prefetch_reductions(picked)

    def _sources(self, steps: list[int], gsteps: list[int], mode: ModeKeys,
                 worker: str | None) -> tuple[list[StepIndex], bool]:
        """The StepIndex each of `steps` (complete ones, as `_select` gives them) is answered
        from, as `value` picks it, and whether all are one worker's."""
        table = self._table
        # Steps of a manifest: only the picked worker's documents are parsed.
        sis = table.picked_step_indexes(self.name, steps, gsteps, mode, worker)
        n = len(sis)
        one_worker = worker is None and table.one_index_per_step()
        if one_worker:
            sis += table.first_of_each(gsteps[n:])
        else:
            for s, gs in zip(steps[n:], gsteps[n:], strict=True):
                held, _ = self._lookup(s, mode)
                sis.append(self._pick(held, gs, s, mode, worker))
            one_worker = worker is not None
        return sis, one_worker

    def values(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        """{step: array} over the complete steps of `mode`, read in bulk."""
        mode = as_mode(mode)
        worker = check_worker(worker)
        self.trial.maybe_refresh()
        steps, gsteps = self._select(mode, False)
        # Steps of a manifest whose values it inlined: from its columns, no document parsed.
        head = self._table.inlined_values(self.name, steps, gsteps, mode, worker)
        if head:
            done = dict(zip(steps, head, strict=False))  # head: a leading part
            steps, gsteps = steps[len(head):], gsteps[len(head):]
            if not steps:
                return done
        sis, one_worker = self._sources(steps, gsteps, mode, worker)
        try:
            # Bulk reads create many small objects and no garbage cycles: the collector is
            # paused meanwhile rather than rescanning the trial's index objects repeatedly.
            with gc_paused():
                arrays = self._fetch.many(sis, self.name, one_worker)
                found = dict(zip(steps, arrays, strict=True))
                return {**done, **found} if head else found
        except NoRawValue as e:
            raise self._no_value(sis[e.index], steps[e.index], mode) from None

    def shape(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> tuple[int, ...]:
        """The saved shape, else the raw value's shape (from the index when it records it)."""
        mode = as_mode(mode)
        step_num = check_step(step_num, "step_num")
        worker = check_worker(worker)
        return self._shape_of(self._step_index(step_num, mode, worker), step_num, mode)

    def _shape_of(self, si: StepIndex, step: int, mode: ModeKeys) -> tuple[int, ...]:
        if si.shapes is not None:
            shape = si.shapes.get(self.name)
            if shape is not None:
                return shape
        entry = si.entries.get(self.name)
        if entry is None:
            raise ShapeUnavailableForStep(self.name, step, mode)
        try:
            shape = entry_shape(entry)
        except ValueError:
            shape = None  # reading the value explains the damaged entry
        if shape is not None and entry.get("content_offset") is not None \
                and self._fetch.reader.describes(si, entry):
            return shape
        return tuple(self._fetch.one(si, entry, self.name).shape)

    def shapes(self, mode: ModeKeys = GLOBAL, worker: str | None = None) -> dict[int, tuple[int, ...]]:
        """{step: shape} over the complete steps of `mode` (documented by smdebug, missing there)."""
        mode = as_mode(mode)
        worker = check_worker(worker)
        self.trial.maybe_refresh()
        steps = self._select(mode, False)[0]
        sis = [self._step_index(s, mode, worker) for s in steps]
        # The entries' shapes answer once found to agree with their records: checked together.
        name = self.name
        checked = [(si, si.entries[name]) for si in sis if si.shapes is None
                   and name in si.entries and "content_offset" in si.entries[name]]
        if checked:
            self._fetch.reader.describe_all(*zip(*checked, strict=True))  # type: ignore[arg-type]
        return {s: self._shape_of(si, s, mode) for s, si in zip(steps, sis, strict=True)}

    def dtype(self, step_num: int, mode: ModeKeys = GLOBAL, worker: str | None = None) -> str:
        """The dtype the value was saved with (e.g. 'bfloat16' even though it reads as float32)."""
        mode = as_mode(mode)
        step_num = check_step(step_num, "step_num")
        si = self._step_index(step_num, mode, check_worker(worker))
        entry = si.entries.get(self.name)
        if entry is None:
            raise self._no_value(si, step_num, mode)
        # From the entry when it agrees with its record (else reading the value explains).
        orig, stored = entry.get("orig_dtype"), entry.get("dtype")
        known = orig is None or (orig.__class__ is str and orig in WIDENED_FROM.get(stored, ()))
        if known and stored is not None and entry.get("content_offset") is not None \
                and self._fetch.reader.describes(si, entry):
            try:
                return orig or np.dtype(stored).name
            except (TypeError, ValueError):
                pass
        value = self._fetch.one(si, entry, self.name)
        return orig if known and orig else value.dtype.name

    def workers(self, step_num: int, mode: ModeKeys = GLOBAL) -> list[str]:
        """Workers that saved anything of this tensor at the step."""
        mode = as_mode(mode)
        step_num = check_step(step_num, "step_num")
        if self._table.num_workers <= 1:  # one writer: the step's one index, if it holds this
            si = self._table.only(mode, step_num)
            if si is not None and self.name in si.names:
                return [si.worker]
        found = self._holders(step_num, mode)
        if found is None:
            self.trial.maybe_refresh(force=True)
            found = self._holders(step_num, mode)
            if found is None:
                damage = self._table.damage_at(step_num, mode)
                if damage is not None:
                    raise damage
                raise TensorUnavailableForStep(self.name, step_num, mode)
        return sorted(found[0])

    # -- reductions ------------------------------------------------------------------------

    def reduction_value(self, step_num: int, reduction_name: str, mode: ModeKeys = GLOBAL,
                        worker: str | None = None, abs: bool = False) -> np.ndarray:
        """A saved reduction, else one computed from the raw value the way hooks compute them."""
        if mode.__class__ is not ModeKeys:
            mode = as_mode(mode)
        if step_num.__class__ is not int:
            step_num = check_step(step_num, "step_num")
        if reduction_name.__class__ is not str:
            check_name(reduction_name, "reduction_name", "e.g. 'mean', 'l2'")
        if worker is not None:
            worker = check_worker(worker)
        table = self._table
        one = worker is None and table.num_workers <= 1
        if one and table.compacted is not None:
            # Saved, or computed from a small value, in a manifest's tensor sections: no
            # document parsed.
            found = table.section_reduction(self.name, mode, step_num, reduction_name,
                                            bool(abs))
            if found is not None:
                return found
        # The usual case inline (one writer, a known step holding this tensor): `_step_index`.
        si = table.only(mode, step_num) if one else None
        if si is None or self.name not in si.names:
            si = self._step_index(step_num, mode, worker)
        name = self.name
        if si.reductions is not None:
            saved = si.reductions.get(name)
            if saved is not None:
                entry = saved.get((reduction_name, bool(abs)))
                if entry is not None:
                    if self._ahead is not None and INLINE_KEY not in entry:
                        self._read_ahead(step_num, mode, worker, (reduction_name, bool(abs)))
                    try:
                        return self._read(si, entry)
                    except FileNotFoundError:
                        return self._fetch.wait_for(si, entry, name)
        entry = si.entries.get(name)
        if entry is None:
            raise TensorUnavailableForStep(name, step_num, mode)
        check_reduction_name(reduction_name)
        if self._ahead is not None and INLINE_KEY not in entry:
            self._read_ahead(step_num, mode, worker, None)
        try:
            return self._reduce(si, entry, reduction_name, bool(abs))
        except FileNotFoundError:
            value = self._fetch.wait_for(si, entry, name)
        return compute_reduction(reduction_name, value, bool(abs), tensor_name=name)

    def reduction_values(self, step_num: int, mode: ModeKeys = GLOBAL,
                         worker: str | None = None, *,
                         only: Collection[tuple[str, bool]] | None = None
                         ) -> dict[tuple[str, bool], np.ndarray]:
        """{(reduction, abs): value} of the reductions that were saved (none are computed);
        with `only`, just those of the (reduction, abs) keys given, the rest left unread."""
        mode = as_mode(mode)
        step_num = check_step(step_num, "step_num")
        si = self._step_index(step_num, mode, check_worker(worker))
        saved = si.reductions.get(self.name) if si.reductions else None
        if not saved:
            return {}
        read = self._fetch.one
        if only is not None:
            return {k: read(si, saved[k], self.name) for k in only if k in saved}
        return {k: read(si, e, self.name) for k, e in saved.items()}

    # -- as a table (smdebug_lite.table; needs the 'export' extra) ---------------------------

    def to_pandas(self, **selection: object) -> object:
        """This tensor's rows of the trial's long-format DataFrame (see Trial.to_pandas)."""
        from smdebug_lite.table import to_pandas

        return to_pandas(self.trial, tensors=[self.name], **selection)
