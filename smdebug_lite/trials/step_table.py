"""`StepTable`: the index files a trial has read, by step, worker and mode.

One object owns the step/worker/mode index so that `Trial` (which fills it from `IndexReader`
polls) and `Tensor` (which looks its steps up in it) share one public interface instead of
each other's fields. It also keeps what decides whether a step is complete, as smdebug did: a
step is complete when every worker wrote it (or its index file was found damaged), when the
trial loaded everything, or when it is at or below `last_complete_step`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from enum import Enum
from itertools import islice
from typing import Any

from smdebug_lite.exceptions import IndexFileCorrupted
from smdebug_lite.index import StepIndex
from smdebug_lite.modes import ModeKeys

GLOBAL = ModeKeys.GLOBAL


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
        self._global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self._mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self._names_of_mode: dict[ModeKeys, set[str]] = {}
        self._last_step_of_worker: dict[str, int] = {}
        # global step -> worker -> why its index file could not be read (the step's other
        # workers, and every other step, stay readable)
        self._damaged: dict[int, dict[str, IndexFileCorrupted]] = {}
        self._index_workers: set[str] = set()

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
    def global_to_mode(self) -> dict[int, tuple[ModeKeys, int]]:
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
        """{worker: StepIndex} of every worker whose index file of global step `gs` was read."""
        return self._by_step.get(gs)

    def first(self, gs: int) -> StepIndex:
        """The lexically first worker's StepIndex of global step `gs` (KeyError if none)."""
        return self._first[gs]

    def first_of_each(self, gsteps: Iterable[int]) -> list[StepIndex]:
        """`first(gs)` for each of `gsteps`, in order."""
        return list(map(self._first.__getitem__, gsteps))

    def only(self, mode: ModeKeys | None, step: int) -> StepIndex | None:
        """The StepIndex of `step` (in `mode` numbering) when exactly one worker's was read,
        else None. (The lookup of every value: kept to a few dictionary reads.)"""
        if mode is GLOBAL:
            gs: int | None = step
        else:
            m2g = self._mode_to_global.get(mode)  # type: ignore[arg-type]
            gs = None if m2g is None else m2g.get(step)
        by_worker = self._by_step.get(gs)  # type: ignore[arg-type]
        if by_worker is not None and len(by_worker) == 1:
            return self._first[gs]  # type: ignore[index]
        return None

    @property
    def index_count(self) -> int:
        """Index files added so far (the position `added_since` counts from)."""
        return len(self._log)

    def added_since(self, n: int) -> Iterable[StepIndex]:
        """Index files added after the first `n`, in the order they were added."""
        return islice(self._log, n, None)

    def steps_holding(self, name: str, since: int = 0) -> list[int]:
        """Global steps (with repeats, one per index file; in the order added) of the index
        files after the first `since` that list tensor `name`."""
        starts, run_names, steps = self._run_starts, self._run_names, self._log_steps
        out: list[int] = []
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
        return len(self._by_step.get(gs, ())) + len(self._damaged.get(gs, ()))

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
        pairs = []
        for g in global_steps:
            m, ms = g2m[g]
            if m is mode:
                pairs.append((ms, g))
        pairs.sort()
        if not show_incomplete and not self.all_loaded:
            pairs = [p for p in pairs if self.is_complete(p[1])]
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


def _same_names(a: Any, b: Any) -> bool:
    """Whether two index files list the same tensor names (a dict's keys, or a set)."""
    if a is b:
        return True
    return (a.keys() if isinstance(a, dict) else a) == (b.keys() if isinstance(b, dict) else b)
