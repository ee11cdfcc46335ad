"""A trial followed while it is written, for ``smdebug-lite watch``: steps per worker and mode,
the step rate, the latest loss and its recent history, the first non-finite record, and
whether training ended. `poll()` reads only what is new since the last one."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

LOSS_HISTORY = 120  # loss values kept for the sparkline
RATE_WINDOW_S = 30.0  # the step rate is measured over this much recent time
LOSS_READS_PER_POLL = 50  # at most this many new loss values are read per poll


@dataclass
class WorkerMode:
    """Index files one worker wrote for one mode."""

    steps: int = 0
    last_step: int = -1  # global step
    last_mode_step: int = -1


@dataclass
class LiveState:
    """What a poll found; `changed` says whether anything new arrived since the last one."""

    opened: bool = False
    ended: bool = False
    steps: int = 0  # distinct global steps saved
    last_step: int = -1
    per_worker_mode: dict[tuple[str, str], WorkerMode] = field(default_factory=dict)
    rate: float | None = None  # global steps per second, recently
    loss_name: str | None = None
    loss_mode: str | None = None
    loss: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=LOSS_HISTORY))
    non_finite: Any = None  # the earliest NonFiniteRecord
    problem: str | None = None  # a read that failed this time (shown, then retried)

    def modes(self) -> dict[str, int]:
        """Steps saved per mode, summed over workers."""
        from smdebug_lite.modes import ModeKeys

        out: dict[str, int] = {}
        for (_, mode), wm in sorted(self.per_worker_mode.items(),
                                    key=lambda kv: (ModeKeys[kv[0][1]].value, kv[0][0])):
            out[mode] = out.get(mode, 0) + wm.steps
        return out


class LiveTrial:
    """`poll()` opens the trial once its collections files exist (a watch may start before
    training does), then follows it."""

    def __init__(self, uri: str, trial_timeout: float) -> None:
        self.uri = uri
        self.trial_timeout = trial_timeout
        self.trial: Any = None
        self.state = LiveState()
        self.last_new_data = time.monotonic()  # when something last arrived (or the watch began)
        self._seen = 0  # index files counted so far
        self._marks: deque[tuple[float, int]] = deque()  # (time, last global step)
        self._loss_steps_read: set[int] = set()

    def _has_collections(self) -> bool:
        from smdebug_lite.format.locations import COLLECTIONS_DIR, parse_collections_file_name
        from smdebug_lite.storage import open_storage

        try:
            keys = open_storage(self.uri).list(COLLECTIONS_DIR)
        except FileNotFoundError:
            return False
        return any(parse_collections_file_name(k) is not None for k in keys)

    def _open(self) -> bool:
        from smdebug_lite.trials import create_trial

        if not self._has_collections():
            return False
        self.trial = create_trial(self.uri, timeout=self.trial_timeout)
        self.state.opened = True
        self.last_new_data = time.monotonic()
        return True

    def poll(self) -> bool:
        """Read what is new; True when something arrived. Errors of one read are kept in
        `state.problem` and the read is tried again at the next poll."""
        from smdebug_lite.exceptions import SMDebugError

        state = self.state
        state.problem = None
        if self.trial is None:
            try:
                if not self._open():
                    return False
            except (SMDebugError, OSError) as e:
                state.problem = f"{type(e).__name__}: {e}"
                return False
        trial = self.trial
        before = (self._seen, state.non_finite, state.ended)
        try:
            trial.maybe_refresh(force=True)
            self._count_steps()
            self._read_loss()
            state.non_finite = trial.first_non_finite()
            state.ended = bool(trial.loaded_all_steps)
        except (SMDebugError, OSError) as e:
            state.problem = f"{type(e).__name__}: {e}"
        changed = (self._seen, state.non_finite, state.ended) != before
        now = time.monotonic()
        if changed:
            self.last_new_data = now
        self._measure_rate(now)
        return changed

    def _count_steps(self) -> None:
        table = self.trial.step_table
        state = self.state
        for si in table.added_since(self._seen):
            mode = si.mode.name if si.mode is not None else "GLOBAL"
            wm = state.per_worker_mode.get((si.worker, mode))
            if wm is None:
                wm = state.per_worker_mode[(si.worker, mode)] = WorkerMode()
            wm.steps += 1
            if si.step > wm.last_step:
                wm.last_step, wm.last_mode_step = si.step, si.mode_step
        self._seen = table.index_count
        state.steps = len(table)
        state.last_step = table.max_step

    def _measure_rate(self, now: float) -> None:
        marks = self._marks
        step = self.state.last_step
        if step < 0:
            return
        if not marks or marks[-1][1] != step:
            marks.append((now, step))
        while len(marks) > 2 and now - marks[1][0] > RATE_WINDOW_S:
            marks.popleft()
        if len(marks) >= 2 and not self.state.ended:
            (t0, s0), s1 = marks[0], marks[-1][1]
            # Measured up to now: a training that stopped writing slows down on screen.
            self.state.rate = (s1 - s0) / (now - t0) if now > t0 else None

    def _read_loss(self) -> None:
        from smdebug_lite.exceptions import SMDebugError
        from smdebug_lite.modes import ModeKeys

        state = self.state
        trial = self.trial
        if state.loss_name is None:
            names = trial.tensor_names(collection="losses")
            if not names:
                return
            state.loss_name = names[0]
        tensor = trial.tensor(state.loss_name)
        mode = ModeKeys.TRAIN
        steps = tensor.steps(mode=mode)
        if not steps:
            mode = ModeKeys.GLOBAL
            steps = tensor.steps()
        state.loss_mode = mode.name
        unread = [s for s in steps if s not in self._loss_steps_read]
        # Only the latest are read; older ones skipped over are never read.
        self._loss_steps_read.update(unread[:-LOSS_READS_PER_POLL])
        for step in unread[-LOSS_READS_PER_POLL:]:
            try:
                value = float(tensor.value(step, mode=mode).mean())
            except (SMDebugError, ValueError, TypeError):
                continue  # tried again at the next poll
            self._loss_steps_read.add(step)
            state.loss.append((step, value))
