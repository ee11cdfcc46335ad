"""`StepTable`: the index files a trial has read, by step, worker and mode.

One object owns the step/worker/mode index so that `Trial` (which fills it from `IndexReader`
polls) and `Tensor` (which looks its steps up in it) share one public interface instead of
each other's fields. It also keeps what decides whether a step is complete, as smdebug did: a
step is complete when every worker wrote it (or its index file was found damaged), when the
trial loaded everything, or when it is at or below `last_complete_step`.

The steps a manifest covers come as one `CompactedIndex` (columns, `add_compacted`) rather
than as StepIndex objects: the table answers from its columns, and parses a document (through
the compacted index's chunk cache) only when a caller needs that step's entries. Its rows come
first in the table's order of index files; files added one by one follow them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, MutableMapping, Sequence
from enum import Enum
from itertools import chain, islice
from typing import Any

import numpy as np

from smdebug_lite.config.reductions import (
    check_reduction_name,
    compute_reduction,
    reduction_tensor_name,
)
from smdebug_lite.exceptions import IndexFileCorrupted
from smdebug_lite.index import StepIndex
from smdebug_lite.index.compacted import CompactedIndex
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials.array_map import ArrayMap
from smdebug_lite.trials.reduction_batch import reduce_all

GLOBAL = ModeKeys.GLOBAL
_MODE_OF_VALUE = {m.value: m for m in ModeKeys}


class StepState(Enum):
    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


class StepTable:
    """Global step -> worker -> `StepIndex`, the mode numbering of each step, the damaged
    index files, and completeness. Returned containers are the table's own: read them, do not
    change them."""

    def __init__(self) -> None:
        self.num_workers = 0  # from the collections file: workers expected at every step
        self.last_complete_step = -1
        self.all_loaded = False  # training ended and every index file was read
        self.max_step = -1
        # Bumped whenever a step is added or completeness may have moved (cached selections).
        self.version = 0
        self.expected_workers: set[str] = set()  # named by the collections files
        self._by_step: dict[int, dict[str, StepIndex]] = {}
        self._first: dict[int, StepIndex] = {}  # global step -> lexically first worker's
        self._log: list[StepIndex] = []  # every index file, in the order it was added
        self._log_steps: list[int] = []  # their steps, in the same order
        # Runs of consecutive index files (in `_log`) that list the same tensor names: where
        # each starts, and its names. A job saves the same tensors step after step, so a
        # tensor's steps are found per run rather than per index file.
        self._run_starts: list[int] = []
        self._run_names: list[Any] = []
        # dicts, or ArrayMaps once a manifest's steps are added
        self._global_to_mode: MutableMapping[int, tuple[ModeKeys, int]] = {}
        self._mode_to_global: dict[ModeKeys, MutableMapping[int, int]] = {}
        self._step_modes = np.zeros(0, dtype=np.int8)  # of the ArrayMaps' steps
        self._step_mode_steps = np.zeros(0, dtype=np.int64)
        self._mode_gsteps: dict[ModeKeys, np.ndarray] = {}  # values of the mode ArrayMaps
        self._names_of_mode: dict[ModeKeys, set[str]] = {}
        self._last_step_of_worker: dict[str, int] = {}
        # global step -> worker -> why its index file could not be read (the step's other
        # workers, and every other step, stay readable)
        self._damaged: dict[int, dict[str, IndexFileCorrupted]] = {}
        self._index_workers: set[str] = set()
        # The steps of a manifest, as columns: its rows are index files 0..len-1 of the
        # table's order. `_seg_steps[i]`'s rows are `_seg_bounds[i]:_seg_bounds[i + 1]`.
        self._seg: CompactedIndex | None = None
        self._seg_rows = 0
        self._seg_last = -1
        self._seg_steps = np.zeros(0, dtype=np.int64)
        self._seg_bounds = np.zeros(1, dtype=np.int64)
        # When each step has one row and the steps are evenly spaced (`first + i * stride`),
        # a step's row is arithmetic: the per-value lookup of `only` needs no search.
        self._seg_single = False
        self._seg_first = 0
        self._seg_stride = 0

    def __len__(self) -> int:
        """Distinct global steps with at least one index file read."""
        return len(self._global_to_mode)

    # -- filling ---------------------------------------------------------------------------

    def add(self, si: StepIndex) -> None:
        step, worker, mode = si.step, si.worker, si.mode
        by_worker = self._by_step.get(step)
        if by_worker is None:
            by_worker = self._by_step[step] = {}
        by_worker[worker] = si
        names = si.names
        if not self._run_names or not _same_names(names, self._run_names[-1]):
            self._run_starts.append(len(self._log))
            self._run_names.append(names)
        self._log.append(si)
        self._log_steps.append(step)
        first = self._first.get(step)
        if first is None or worker < first.worker:
            self._first[step] = si
        if mode is not GLOBAL:
            self._mode_to_global.setdefault(mode, {}).setdefault(si.mode_step, step)
            keys = names.keys() if isinstance(names, dict) else names
            mode_names = self._names_of_mode.get(mode)
            if mode_names is None:
                mode_names = self._names_of_mode[mode] = set()
            if not keys <= mode_names:
                mode_names.update(keys)
        if step not in self._global_to_mode:
            self._global_to_mode[step] = (mode, si.mode_step)
            if step > self.max_step:
                self.max_step = step
        if step > self._last_step_of_worker.get(worker, -1):
            self._last_step_of_worker[worker] = step
        self._index_workers.add(worker)
        if step > self.last_complete_step and len(by_worker) + len(
                self._damaged.get(step, ()) if self._damaged else ()) >= self.num_workers:
            self.last_complete_step = step
        self.version += 1

    def add_compacted(self, seg: CompactedIndex) -> None:
        """The steps a manifest covers, before any index file is added one by one."""
        if self._seg is not None or self._log:
            raise ValueError("a compacted index must be the first thing added to a step table")
        self._seg, self._seg_rows = seg, len(seg)
        if not len(seg):
            return
        steps = seg.step
        self._seg_last = int(steps[-1])
        first = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]])  # rows are in step order
        ustep = steps[first]
        self._seg_steps = ustep
        self._seg_bounds = np.r_[first, len(steps)].astype(np.int64)
        counts = np.diff(self._seg_bounds)
        self._seg_single = bool(len(steps) == len(ustep))
        self._seg_first = int(ustep[0])
        gaps = np.diff(ustep)
        self._seg_stride = int(gaps[0]) if len(gaps) and bool((gaps == gaps[0]).all()) else 0
        # Step -> (mode, mode step) of the first index file of the step, and per mode its
        # mode steps -> the first global step holding each: arrays, not dicts (see ArrayMap).
        self._step_modes = seg.mode[first].copy()
        self._step_mode_steps = seg.mode_step[first].copy()
        self._global_to_mode = ArrayMap(ustep, self._mode_at)
        # A row repeating the previous row's mode and mode step never comes first.
        new = np.flatnonzero(np.r_[True, (seg.mode[1:] != seg.mode[:-1])
                                   | (seg.mode_step[1:] != seg.mode_step[:-1])])
        for value in np.unique(seg.mode[new]).tolist():
            mode = _MODE_OF_VALUE[value]
            if mode is GLOBAL:
                continue
            rows = new[seg.mode[new] == value]
            mode_steps, at = np.unique(seg.mode_step[rows], return_index=True)
            m2g = self._mode_gsteps[mode] = steps[rows[at]]
            self._mode_to_global[mode] = ArrayMap(mode_steps, _int_at(m2g))
            names = self._names_of_mode.setdefault(mode, set())
            for k in np.unique(seg.nameset[rows]).tolist():
                names.update(seg.namesets[k])
        ustep_list = ustep.tolist()
        if ustep_list[-1] > self.max_step:
            self.max_step = ustep_list[-1]
        for w, name in enumerate(seg.workers):
            rows = seg.worker == w
            if rows.any():
                last = int(steps[rows].max())
                if last > self._last_step_of_worker.get(name, -1):
                    self._last_step_of_worker[name] = last
                self._index_workers.add(name)
        written = counts
        if self._damaged:
            written = counts + np.array([len(self._damaged.get(g, ())) for g in ustep_list])
        full = ustep[written >= self.num_workers]
        if len(full) and int(full[-1]) > self.last_complete_step:
            self.last_complete_step = int(full[-1])
        seg.drop_modes()  # kept here, per step
        self.version += 1

    def _mode_at(self, i: int) -> tuple[ModeKeys, int]:
        return _MODE_OF_VALUE[int(self._step_modes[i])], int(self._step_mode_steps[i])

    def _modes_of(self, gsteps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ModeKeys values, mode steps) of global steps (KeyError for one not known)."""
        g2m = self._global_to_mode
        assert isinstance(g2m, ArrayMap)
        at = g2m.positions(gsteps)
        modes = self._step_modes[np.maximum(at, 0)].astype(np.int64)
        mode_steps = self._step_mode_steps[np.maximum(at, 0)].copy()
        for i in np.flatnonzero(at < 0).tolist():
            m, ms = g2m[int(gsteps[i])]  # added one by one (KeyError if unknown)
            modes[i], mode_steps[i] = m.value, ms
        return modes, mode_steps

    @property
    def compacted(self) -> CompactedIndex | None:
        """The manifest's steps, when the trial was opened from one."""
        return self._seg

    def _seg_range(self, gs: int) -> tuple[int, int] | None:
        """Rows of the compacted index at global step `gs`, or None."""
        if gs > self._seg_last or gs < 0:
            return None
        i = int(np.searchsorted(self._seg_steps, gs))
        if i >= len(self._seg_steps) or int(self._seg_steps[i]) != gs:
            return None
        return int(self._seg_bounds[i]), int(self._seg_bounds[i + 1])

    def _seg_only_row(self, gs: int) -> int:
        """The row of global step `gs` when the compacted index holds one row per step, it is
        a known step and no index file read after the manifest holds it too; else -1 (then
        `holders` answers)."""
        if not self._seg_single or gs < 0 or gs > self._seg_last:
            return -1
        stride = self._seg_stride
        if stride:
            i, off = divmod(gs - self._seg_first, stride)
            row = i if not off and i >= 0 else -1
        else:
            i = int(self._seg_steps.searchsorted(gs))
            row = i if i < len(self._seg_steps) and int(self._seg_steps[i]) == gs else -1
        return -1 if row < 0 or gs in self._by_step else row

    def add_damage(self, damage: IndexFileCorrupted) -> None:
        """A worker's index file of a step that could not be read: the worker did write the
        step, so it counts towards the step's completeness, and asking for the step raises
        `damage` instead of saying it was not saved."""
        step, worker = damage.step, damage.worker
        assert step is not None and worker is not None
        self._damaged.setdefault(step, {})[worker] = damage
        self._index_workers.add(worker)
        if step > self._last_step_of_worker.get(worker, -1):
            self._last_step_of_worker[worker] = step
        if self.workers_written(step) >= self.num_workers and step > self.last_complete_step:
            self.last_complete_step = step
        self.version += 1

    def set_last_complete_step(self, step: int) -> None:
        """Count every step up to `step` complete (no longer waited for)."""
        self.last_complete_step = step
        self.version += 1

    def set_all_loaded(self, flag: bool) -> None:
        self.all_loaded = flag
        self.version += 1

    def mark_all_loaded(self) -> None:
        self.all_loaded = True
        if self._global_to_mode:
            self.last_complete_step = self.max_step
        self.version += 1

    # -- steps and modes -------------------------------------------------------------------

    @property
    def global_to_mode(self) -> MutableMapping[int, tuple[ModeKeys, int]]:
        """Global step -> (mode, mode step)."""
        return self._global_to_mode

    def global_step(self, mode: ModeKeys | None, mode_step: int) -> int | None:
        if mode is GLOBAL:
            return mode_step
        m2g = self._mode_to_global.get(mode)  # type: ignore[arg-type]
        return None if m2g is None else m2g.get(mode_step)

    def modes(self) -> list[ModeKeys]:
        """Modes seen so far (GLOBAL is never listed)."""
        return sorted(self._mode_to_global, key=lambda m: m.value)

    def names_of_mode(self, mode: ModeKeys | None) -> set[str]:
        """Tensor names saved under `mode` (not GLOBAL: the trial knows those)."""
        return self._names_of_mode.get(mode, set())  # type: ignore[arg-type]

    def incomplete_steps(self) -> list[int]:
        """Sorted global steps after the last complete one."""
        lcs = self.last_complete_step
        return sorted(s for s in self._global_to_mode if s > lcs)

    # -- index files -----------------------------------------------------------------------

    def holders(self, gs: int) -> dict[str, StepIndex] | None:
        """{worker: StepIndex} of every worker whose index file of global step `gs` was read
        (do not change it)."""
        found = self._by_step.get(gs)
        if gs > self._seg_last:
            return found
        rows = self._seg_range(gs)
        if rows is None:
            return found
        seg = self._seg
        assert seg is not None
        out = {seg.workers[int(seg.worker[p])]: seg.step_index(p) for p in range(*rows)}
        if found:
            out.update(found)
        return out

    def first(self, gs: int) -> StepIndex:
        """The lexically first worker's StepIndex of global step `gs` (KeyError if none)."""
        if gs <= self._seg_last:
            held = self.holders(gs)
            if held:
                return held[min(held)]
        return self._first[gs]

    def first_of_each(self, gsteps: Iterable[int]) -> list[StepIndex]:
        """`first(gs)` for each of `gsteps`, in order."""
        if self._seg_rows:
            return list(map(self.first, gsteps))
        return list(map(self._first.__getitem__, gsteps))

    def inlined_values(self, name: str, steps: Sequence[int], gsteps: Sequence[int],
                       mode: ModeKeys, worker: str | None) -> list[np.ndarray]:
        """The values of tensor `name` that a manifest inlined, for the longest leading run of
        `steps` (of `mode`; `gsteps` their global steps, as `select` gives them) it can
        answer: at each, from `worker`'s index file, else from the lexically first worker's
        that lists `name` (what `Tensor` would pick). Read from the tensor's columns, no
        document parsed."""
        rows = self._picked_rows(name, steps, gsteps, mode, worker)
        return self._seg.inlined(name, rows) if len(rows) else []  # type: ignore[union-attr]

    def picked_step_indexes(self, name: str, steps: Sequence[int], gsteps: Sequence[int],
                            mode: ModeKeys, worker: str | None) -> list[StepIndex]:
        """Like `inlined_values`, the index files (parsed now) a value of `name` is read from
        for the leading run of steps a manifest covers: only the picked worker's documents
        are parsed, not every worker's."""
        seg = self._seg
        rows = self._picked_rows(name, steps, gsteps, mode, worker)
        return [seg.step_index(p) for p in rows.tolist()] if len(rows) else []  # type: ignore[union-attr]

    def _picked_rows(self, name: str, steps: Sequence[int], gsteps: Sequence[int],
                     mode: ModeKeys, worker: str | None) -> np.ndarray:
        """Rows of the compacted index for the leading run of `steps` it can answer."""
        seg = self._seg
        none = np.zeros(0, dtype=np.int64)
        if seg is None or not gsteps or gsteps[0] > self._seg_last:
            return none
        arr = np.asarray(gsteps, dtype=np.int64)
        if mode is not GLOBAL and not (worker is None and self.one_index_per_step()):
            # A step is looked up by its mode step (the first global step holding it).
            m2g = self._mode_to_global.get(mode, {})
            if isinstance(m2g, ArrayMap) and not m2g.extra:
                at = m2g.positions(np.asarray(steps, dtype=np.int64))
                arr = np.where(at >= 0, self._mode_gsteps[mode][np.maximum(at, 0)], -1)
            else:
                arr = np.array([m2g.get(s, -1) for s in steps], dtype=np.int64)
        beyond = (arr > self._seg_last) | (arr < 0)
        if self._by_step:
            overlap = [g for g in self._by_step if g <= self._seg_last]
            if overlap:
                beyond |= np.isin(arr, overlap)
        stop = np.flatnonzero(beyond)
        k = int(stop[0]) if len(stop) else len(arr)
        wid = None
        if worker is not None:
            if worker not in seg.workers:
                return none
            wid = seg.workers.index(worker)
        rows = seg.pick_rows(name, arr[:k], wid)
        missing = np.flatnonzero(rows < 0)
        return rows[:int(missing[0])] if len(missing) else rows

    def only(self, mode: ModeKeys | None, step: int) -> StepIndex | None:
        """The StepIndex of `step` (in `mode` numbering) when exactly one worker's was read,
        else None. (The lookup of every value: kept to a few dictionary reads.)"""
        if mode is GLOBAL:
            gs: int | None = step
        else:
            m2g = self._mode_to_global.get(mode)  # type: ignore[arg-type]
            gs = None if m2g is None else m2g.get(step)
        if gs is not None and gs <= self._seg_last:
            row = self._seg_only_row(gs)
            if row >= 0:
                return self._seg.step_index(row)  # type: ignore[union-attr]
            held = self.holders(gs)
            return next(iter(held.values())) if held and len(held) == 1 else None
        by_worker = self._by_step.get(gs)  # type: ignore[arg-type]
        if by_worker is not None and len(by_worker) == 1:
            return self._first[gs]  # type: ignore[index]
        return None

    def section_value(self, name: str, mode: ModeKeys | None,
                      step: int) -> np.ndarray | None:
        """The value of raw tensor `name` at `step` (in `mode` numbering) when a manifest's
        tensor section holds it and the trial has one index file per step: read without
        parsing any document. None otherwise (then `only` answers)."""
        row = self._seg_row(mode, step)
        if row < 0:
            return None
        found = self._seg.section_at(name, row)  # type: ignore[union-attr]
        return None if found is None else found[0].values[found[1]]

    def section_reduction(self, name: str, mode: ModeKeys | None, step: int, reduction: str,
                          is_abs: bool) -> np.ndarray | np.generic | None:
        """`Tensor.reduction_value` from a manifest's tensor sections, as `section_value`:
        the saved reduction's value, else (when no document of the chunk saved that one for
        `name`) computed from the raw value (those of the whole section at once, bit for bit
        as one by one, and kept with it). None when the sections cannot say."""
        row = self._seg_row(mode, step)
        if row < 0:
            return None
        seg = self._seg
        assert seg is not None
        raw = seg.section_at(name, row)
        if raw is None or raw[0].reduced is None or (reduction, is_abs) in raw[0].reduced:
            # Perhaps saved: its own section holds it, else the documents answer.
            saved = seg.section_at(reduction_tensor_name(name, reduction, is_abs,
                                                         keep_tf_suffix=True), row)
            return None if saved is None else saved[0].values[saved[1]]
        sec, at = raw
        if sec.values[at] is None:
            return None
        check_reduction_name(reduction)
        done = sec.derived.get((reduction, is_abs))
        if done is None:
            done = sec.derived[(reduction, is_abs)] = reduce_all(reduction, is_abs, sec.values,
                                                                 name)
        value = done[at]
        if value is None:
            value = done[at] = compute_reduction(reduction, sec.values[at], is_abs,
                                                 tensor_name=name)
        return value

    def _seg_row(self, mode: ModeKeys | None, step: int) -> int:
        """The compacted index's only row of `step` (in `mode` numbering), else -1."""
        if self._seg is None:
            return -1
        gs = self.global_step(mode, step)
        return -1 if gs is None else self._seg_only_row(gs)

    @property
    def index_count(self) -> int:
        """Index files added so far (the position `added_since` counts from)."""
        return self._seg_rows + len(self._log)

    def added_since(self, n: int) -> Iterable[StepIndex]:
        """Index files added after the first `n`, in the order they were added (those of a
        manifest are parsed on the way)."""
        if n < self._seg_rows:
            seg = self._seg
            assert seg is not None
            return chain(map(seg.step_index, range(n, self._seg_rows)), self._log)
        return islice(self._log, n - self._seg_rows, None)

    def steps_holding(self, name: str, since: int = 0) -> list[int]:
        """Global steps (with repeats, one per index file; in the order added) of the index
        files after the first `since` that list tensor `name`."""
        out: list[int] = []
        if since < self._seg_rows:
            seg = self._seg
            assert seg is not None
            out = seg.step[since:][seg.rows_holding(name, since)].tolist()
        since = max(0, since - self._seg_rows)
        starts, run_names, steps = self._run_starts, self._run_names, self._log_steps
        i = max(0, bisect.bisect_right(starts, since) - 1)
        for k in range(i, len(starts)):
            if name in run_names[k]:
                end = starts[k + 1] if k + 1 < len(starts) else len(steps)
                out += steps[max(starts[k], since):end]
        return out

    # -- workers ---------------------------------------------------------------------------

    def index_workers(self) -> set[str]:
        """Workers with an index file read (or found damaged)."""
        return self._index_workers

    def all_workers(self) -> set[str]:
        return self.expected_workers | self._index_workers

    def one_index_per_step(self) -> bool:
        """True when every step has a single index file (one writing worker)."""
        return len(self._index_workers) <= 1

    def last_step_of(self, worker: str) -> int:
        """The last global step `worker` wrote an index file for (-1: none)."""
        return self._last_step_of_worker.get(worker, -1)

    # -- completeness ----------------------------------------------------------------------

    def workers_written(self, gs: int) -> int:
        """Workers whose index file of `gs` was read or found damaged."""
        n = len(self._by_step.get(gs, ())) + len(self._damaged.get(gs, ()))
        if gs <= self._seg_last:
            rows = self._seg_range(gs)
            if rows is not None:
                n += rows[1] - rows[0]
        return n

    def is_complete(self, gs: int) -> bool:
        return (
            self.all_loaded
            or gs <= self.last_complete_step
            or self.workers_written(gs) >= self.num_workers
        )

    def select(self, global_steps: Sequence[int] | Iterable[int], mode: ModeKeys,
               show_incomplete: bool) -> tuple[list[int], list[int]]:
        """(steps in `mode` numbering, their global steps), sorted, complete ones unless asked."""
        if mode is GLOBAL:
            gsteps = sorted(global_steps)
            if not show_incomplete and not self.all_loaded:
                gsteps = [g for g in gsteps if self.is_complete(g)]
            return gsteps, gsteps
        g2m = self._global_to_mode
        if isinstance(g2m, ArrayMap):  # a manifest's steps: looked up together
            gs = np.fromiter(global_steps, dtype=np.int64)
            modes, mode_steps = self._modes_of(gs)
            picked = modes == mode.value
            gs, mode_steps = gs[picked], mode_steps[picked]
            order = np.lexsort((gs, mode_steps))
            pairs = list(zip(mode_steps[order].tolist(), gs[order].tolist(), strict=True))
        else:
            pairs = []
            for g in global_steps:
                m, ms = g2m[g]
                if m is mode:
                    pairs.append((ms, g))
            pairs.sort()
        if not show_incomplete and not self.all_loaded:
            lcs = self.last_complete_step
            pairs = [p for p in pairs if p[1] <= lcs or self.is_complete(p[1])]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def all_steps(self, mode: ModeKeys) -> list[int]:
        """Every step of `mode` (mode numbering), complete or not."""
        return self.select(self._global_to_mode, mode, True)[0]

    # -- damaged index files ---------------------------------------------------------------

    def damage_at(self, step: int, mode: ModeKeys | None,
                  worker: str | None = None) -> IndexFileCorrupted | None:
        """The damaged index file that may hold `step` of `mode` (of `worker` if given).

        A damaged file's mode is unknown: a mode step is matched to the damaged global steps
        between the global steps of the mode's neighbouring known steps."""
        damaged = self._damaged
        if not damaged or mode is None:
            return None
        if mode is GLOBAL:
            candidates = [step] if step in damaged else []
        else:
            m2g = self._mode_to_global.get(mode, {})
            if step in m2g:
                candidates = [m2g[step]]
            else:
                lower = [g for ms, g in m2g.items() if ms < step]
                upper = [g for ms, g in m2g.items() if ms > step]
                lo = max(lower, default=-1)
                hi = min(upper, default=float("inf"))
                candidates = sorted(g for g in damaged if lo < g < hi)
        for g in candidates:
            by_worker = damaged.get(g)
            if by_worker:
                if worker is None:
                    return by_worker[min(by_worker)]
                if worker in by_worker:
                    return by_worker[worker]
        return None


def _int_at(values: np.ndarray) -> Any:
    """`ArrayMap`'s value_at for an array of ints."""
    return lambda i: int(values[i])


def _same_names(a: Any, b: Any) -> bool:
    """Whether two index files list the same tensor names (a dict's keys, or a set)."""
    if a is b:
        return True
    return (a.keys() if isinstance(a, dict) else a) == (b.keys() if isinstance(b, dict) else b)
