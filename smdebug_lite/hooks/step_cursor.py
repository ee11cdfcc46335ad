"""Where a hook is in training: the mode, the global step, each mode's step, and which of the
included collections save the current step.

Each hook has one `StepCursor`, which only its step machine (`step_machine`) and the core
move, never a framework adapter: a new step of the current mode (`advance`), a
step the framework numbers itself (`set_step`, XGBoost rounds), a mode change, a resumed spot
job (`resume`). It also answers "which collections save now" (`select`) and keeps, per mode, a
*quiet window*: the steps until the next one at which any included collection saves. Steps
inside it skip the per-collection checks, and the step machine counts them down (`quiet_left`,
`count_quiet_step`) without asking anything else.

Anything that could change those answers ends the countdown: a mode change here, and any save
schedule change, which `SaveConfig` reports to every live cursor (`schedules_changed`): each
cursor then moves its own `epoch`, and windows and steady cycles decided under an older epoch
are recomputed.
"""

from __future__ import annotations

import math

from smdebug_lite.config.arguments import parse_mode
from smdebug_lite.config.collection import EVAL_PREDICT_SKIPPED_COLLECTIONS, Collection
from smdebug_lite.config.save_config import SaveConfigMode, watch_schedules
from smdebug_lite.hooks.training_state import TrainingState
from smdebug_lite.modes import ModeKeys

FOREVER = 1 << 62  # quiet steps ahead when no collection ever saves again
_GLOBAL = ModeKeys.GLOBAL
_NO_GRADIENTS = (ModeKeys.EVAL, ModeKeys.PREDICT)


class StepCursor:
    """The step counters and save schedule of one hook (see the module docstring)."""

    __slots__ = ("mode", "step", "mode_steps", "epoch", "quiet_left", "quiet_epoch", "windows",
                 "_schedules", "__weakref__")

    def __init__(self) -> None:
        self.mode = _GLOBAL
        self.step = -1
        self.mode_steps: dict[ModeKeys, int] = {_GLOBAL: -1}
        self.epoch = 0  # moves at every save schedule change
        # Steps an adapter may still start without asking anything (valid while `epoch` is
        # `quiet_epoch`); see `steps_ahead`.
        self.quiet_left = 0
        self.quiet_epoch = -1
        # mode -> (epoch, mode step checked, next mode step at which an included collection
        # saves): steps strictly between the two save nothing.
        self.windows: dict[ModeKeys, tuple[int, int, float]] = {}
        self._schedules: dict[ModeKeys, tuple[int, tuple]] = {}  # see `schedule`
        watch_schedules(self)

    # -- counters ----------------------------------------------------------------------------

    @property
    def mode_step(self) -> int:
        return self.mode_steps.get(self.mode, -1)

    def set_mode(self, mode) -> None:
        mode = parse_mode(mode)
        if mode is not self.mode:  # (loops that set the mode at every step keep the countdown)
            self.quiet_left = 0
        self.mode = mode
        self.mode_steps.setdefault(mode, -1)

    def advance(self) -> int:
        """A new step of the current mode: the one place steps are counted. Returns it."""
        step = self.step = self.step + 1
        mode = self.mode
        mode_steps = self.mode_steps
        mode_steps[mode] += 1  # (`set_mode` gave every mode an entry)
        if mode is not _GLOBAL:
            mode_steps[_GLOBAL] = step
        return step

    def advance_to(self, step: int) -> int:
        """A new step of the current mode numbered `step` (greater than the current one): the
        steps skipped count as steps of this mode too, so that in a run of one mode the mode's
        step stays the global step. Returns it."""
        self.quiet_left = 0
        self.mode_steps[self.mode] += step - self.step - 1
        self.step = step - 1
        return self.advance()

    def set_step(self, step: int, mode=None) -> None:
        """A step the framework numbers itself (XGBoost rounds), in `mode` if given."""
        self.quiet_left = 0
        if mode is not None:
            self.set_mode(mode)
        self.step = int(step)
        self.mode_steps[self.mode] = self.step
        if self.mode is not _GLOBAL:
            self.mode_steps[_GLOBAL] = self.step

    def resume(self, state: TrainingState) -> tuple[int, int | None] | None:
        """Continue the counters of the run before a restart (spot training): (the last step,
        the last saved step), or None when there is nothing to resume."""
        counters = state.resume_counters()
        if counters is None:
            return None
        step, mode_steps, last_saved = counters
        self.step = step
        self.mode_steps.update(mode_steps)
        self.mode_steps[_GLOBAL] = step
        return step, last_saved

    # -- schedules ---------------------------------------------------------------------------

    def schedules_changed(self) -> None:
        """A save schedule changed somewhere: nothing worked out before holds."""
        self.epoch += 1
        self.quiet_left = 0

    def reset(self) -> None:
        """The included collections changed."""
        self.quiet_left = 0
        self.windows.clear()
        self._schedules.clear()

    def schedule(self, mode: ModeKeys, included: list[Collection]
                 ) -> tuple[list[SaveConfigMode], list[tuple[Collection, int]]]:
        """The distinct schedules of the `included` collections that can save in `mode`
        (gradients never in EVAL/PREDICT), and each such collection with the index of its
        schedule; kept until a schedule or the collections change. Collections usually share
        one schedule (copies of the hook's), which is then asked once per step."""
        epoch = self.epoch
        cached = self._schedules.get(mode)
        if cached is not None and cached[0] == epoch:
            return cached[1]
        no_grads = mode in _NO_GRADIENTS
        schedules: list[SaveConfigMode] = []
        index: dict[tuple, int] = {}
        members: list[tuple[Collection, int]] = []
        for c in included:
            if no_grads and c.name in EVAL_PREDICT_SKIPPED_COLLECTIONS:
                continue
            cfg = c.save_config.get_save_config(mode)
            key = (cfg.save_interval, cfg.start_step, cfg.end_step, tuple(cfg.save_steps))
            if key not in index:
                index[key] = len(schedules)
                schedules.append(cfg)
            members.append((c, index[key]))
        self._schedules[mode] = (epoch, (schedules, members))
        return schedules, members

    def select(self, included: list[Collection]) -> list[Collection]:
        """The `included` collections that save the current step; opens the mode's quiet
        window up to the next step at which one of them saves."""
        mode = self.mode
        mode_step = self.mode_steps.get(mode, -1)
        schedules, members = self.schedule(mode, included)
        due = [cfg.should_save_step(mode_step) for cfg in schedules]
        saving = [c for c, i in members if due[i]] if any(due) else []
        following = math.inf
        for cfg in schedules:
            n = cfg.next_save_step(mode_step + 1)
            if n is not None and n < following:
                following = n
        self.windows[mode] = (self.epoch, mode_step, following)
        return saving

    def in_quiet_window(self) -> bool:
        """Whether the current step lies in its mode's quiet window: no included collection
        saves it, and no schedule changed since that was worked out."""
        window = self.windows.get(self.mode)
        return (window is not None and window[0] == self.epoch
                and window[1] < self.mode_steps.get(self.mode, -1) < window[2])

    def window(self, mode: ModeKeys) -> tuple[int, int, float] | None:
        """The mode's quiet window (epoch, checked, next saving step) if still valid."""
        window = self.windows.get(mode)
        return window if window is not None and window[0] == self.epoch else None

    def open_window(self, mode: ModeKeys, mode_step: int, following: float) -> None:
        """Record a quiet window the caller worked out (a replayed saving step)."""
        self.windows[mode] = (self.epoch, mode_step, following)

    def steps_ahead(self) -> int:
        """How many of the next steps lie in the current mode's quiet window (the current step
        too must lie in it, or be the step that opened it). Sets the countdown to it."""
        mode_step = self.mode_steps.get(self.mode, -1)
        window = self.windows.get(self.mode)
        if (window is None or window[0] != self.epoch
                or not window[1] <= mode_step < window[2]):
            self.quiet_left = 0
            return 0
        self.quiet_epoch = self.epoch
        left = FOREVER if window[2] == math.inf else int(window[2]) - mode_step - 1
        self.quiet_left = left
        return left

    def count_quiet_step(self) -> bool:
        """If the next step is one of the counted-down quiet steps, count it and return True
        (nothing else is to be done for it). Runs at almost every step: `advance` is written
        out here rather than called."""
        left = self.quiet_left
        if left and self.epoch == self.quiet_epoch:
            self.quiet_left = left - 1
            step = self.step = self.step + 1
            mode = self.mode
            mode_steps = self.mode_steps
            mode_steps[mode] += 1
            if mode is not _GLOBAL:
                mode_steps[_GLOBAL] = step
            return True
        return False


__all__ = ["FOREVER", "StepCursor"]
