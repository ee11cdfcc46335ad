"""Every path through a step, for every hook: the one step machine.

A step begins, captures, and ends; the machine owns each way that happens, and the framework
adapters only answer its calls (`Capture`). The paths, in order of how often they run:

* **A quiet step** (`quiet_step`, or `start` inline): the step lies in its mode's quiet window
  (no included collection saves it, `StepCursor.steps_ahead`), so only the counters move: a
  countdown decrement and the step counters, nothing allocated, nothing else called.
* **The steady saving cycle** (`steady_cycle`): a saving step like the last one starts with one
  set of guards and the moves it needs (`_cycle_begin`: counters, the pending step, the
  framework's `Capture.cycle_begin`), and ends the same way (`_cycle_end`: the step goes to the
  writer as a repeat of the record it replayed; the next step is quiet).
* **The general path** (`_next`): the step before ends (`end`: the framework's captures go
  into the pending step, which goes to the writer), the counters move, the collections that
  save the new step are selected and its pending step is made (`_begin`), then the framework
  is told whether this step captures (`Capture.attach_capture` / `detach_capture`), a record
  of an earlier step is replayed if nothing it relies on changed, and a quiet step counts the
  steps ahead and may take a steady cycle.

XGBoost numbers its own steps (`set_step`); Keras and the hook core's API begin steps through
`next_step`; PyTorch's forward pre-hook and `start_step` through `begin` and `start`.

Records: a framework whose captures can be recorded (PyTorch, `pytorch.step_record`) returns a
record from `Capture.flush`; the machine makes it the record once the writer holds the step as
a template (`_adopt`), starts replaying it at a later saving step, and hands a step that
replayed it whole to the writer as a repeat. What a record must offer is `Record`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from smdebug_lite.hooks.steady_cycle import SteadyCycle
from smdebug_lite.hooks.step_cursor import StepCursor
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer import PendingStep

if TYPE_CHECKING:
    from smdebug_lite.hooks.capture_plan import CapturePlan
    from smdebug_lite.hooks.core import HookCore

_INF = math.inf


class Record(Protocol):
    """A completed saving step a later one may replay, as the machine sees it."""

    plan_cache: dict | None  # the plans it was captured under

    def repeatable_by(self, writer: object) -> bool:
        """`writer` wrote it and still holds its template."""

    def ready(self) -> bool:
        """Every step that used its buffers is written."""

    def repeat_as(self, sw: PendingStep) -> None:
        """Make `sw` a repeat of its template."""

    def used_by(self, token: int) -> None: ...

    def written(self) -> None: ...

    def adopt(self, template: object, writer: object) -> bool:
        """The writer holds it as `template`: it becomes replayable (False: it cannot)."""

    def drop(self) -> None: ...


class Capture:
    """A framework's side of a step: what the step machine asks of it.

    This base captures nothing, which is what hooks that write what they find as they go
    (XGBoost; Keras, which only empties its per-step state) need. PyTorch's hook captures
    tensors in torch hooks and records steps (`pytorch.step_capture`). `capturing` is set by the
    machine only: whether the current step captures."""

    collective = False  # a capture makes collectives: every rank captures, even disabled

    def __init__(self) -> None:
        self.capturing = False

    # -- every step the machine begins (not the counted-down ones) ------------------------

    def step_began(self) -> None:
        """A step began (its saving set is decided)."""

    def attach_capture(self, saving_ids: frozenset[int]) -> None:
        """The step captures, for the collections whose ids are `saving_ids`."""

    def detach_capture(self) -> None:
        """The step captures nothing: what `attach_capture` set up stands down."""

    def capture_start(self, source: Any) -> None:
        """A capturing step began from `source` (PyTorch: the models whose parameters it
        saves now)."""

    # -- the step's end ------------------------------------------------------------------------

    def holds(self) -> bool:
        """Something was captured in this step."""
        return False

    def discard(self) -> None:
        """Drop what was captured (the hook is disabled)."""

    def flush(self, sw: PendingStep | None, recordable: bool) -> Record | None:
        """Put what was captured into `sw` (the step's pending step, if it writes); a record
        of the step when `recordable` and it can be replayed later."""
        return None

    # -- records and their replay ------------------------------------------------------------

    @property
    def record(self) -> Record | None:
        """The record later saving steps may replay."""
        return None

    def keep_record(self, record: Record) -> None:
        """`record` is the record from now on."""

    def begin_replay(self, record: Record) -> bool:
        """Capture this step by replaying `record`."""
        return False

    def replayed(self) -> Record | None:
        """The record this step replayed whole, with nothing else captured."""
        return None

    def end_replay(self) -> None:
        """The replayed step goes over as a repeat of the record."""

    def attached(self) -> Any:
        """What is attached for the current saving set (compared in `cycle_parts`)."""
        return None

    # -- the steady cycle ----------------------------------------------------------------------

    def cycle_parts(self, saving_ids: frozenset[int], plan_cache: dict, record: Record,
                    attached: Any) -> Any:
        """What this framework attaches and captures for the cycle's saving steps, or None
        when it cannot carry them out."""
        return None

    def cycle_begin(self, parts: Any, source: Any, record: Record) -> bool:
        """Start the cycle's saving step from `source`, replaying `record`, if it is still the
        record (False, having changed nothing: the general path starts it)."""
        return False

    def cycle_end(self, parts: Any, record: Record) -> bool:
        """End the cycle's saving step, which must have replayed `record` whole (False, having
        changed nothing: the general path ends it)."""
        return False


def _record_used(rec: Record, sw: PendingStep, template: object) -> None:
    rec.used_by(sw.token)


class StepMachine:
    """The steps of one hook (see the module docstring). The hook core owns it; framework
    adapters call `quiet_step`, `begin`, `start`, `next_step`, `set_step` and `end`."""

    __slots__ = ("hook", "cursor", "plans", "capture", "pending", "deferred", "cycle",
                 "last_saved_step", "quiet_step", "_repeated")

    def __init__(self, hook: HookCore, cursor: StepCursor, plans: CapturePlan,
                 capture: Capture) -> None:
        self.hook = hook
        self.cursor = cursor
        self.plans = plans
        self.capture = capture
        self.pending: PendingStep | None = None  # the current step's tensors, if it saves
        # save_scalar/save_tensor calls made before the first step began: replayed at its start
        # (smdebug's step counter started at 0, so such values landed in step 0).
        self.deferred: list[Callable[[], None]] = []
        self.cycle: SteadyCycle | None = None
        self.last_saved_step: int | None = None
        # Count a quiet step, if the next step is one: True when that is all there is to do.
        self.quiet_step: Callable[[], bool] = cursor.count_quiet_step
        # (saving, their ids, plan cache, what was attached, record) of a step just handed
        # over as a repeat: what `_take_cycle` makes a SteadyCycle of when the next is quiet
        self._repeated: tuple | None = None

    # -- where steps begin ----------------------------------------------------------------------

    def start(self, step: int | None, mode: ModeKeys | None, source: Any, where: str) -> None:
        """A step begins where the training loop says (PyTorch's `start_step`), in `mode` if
        given, numbered `step` if given (arguments checked); counted down when quiet."""
        cursor = self.cursor
        if mode is not None and mode is not cursor.mode:
            cursor.set_mode(mode)
        if step is None or step == cursor.step + 1:
            if self.quiet_step():
                return
            self.begin(source, None, where)
        else:
            cursor.quiet_left = 0
            self.cycle = None
            self.begin(source, step, where)

    def begin(self, source: Any, step: int | None, where: str) -> None:
        """A step begins that the countdown did not count (numbered `step`, if given):
        `source` is what the framework's `capture_start` reads the step's first tensors from.
        Errors are the hook's failures in `where`."""
        hook = self.hook
        capture = self.capture
        if (hook.disabled and not capture.collective) or hook.closed:
            # (a disabled hook of a sharded model goes on making the collectives of saving
            # steps, and discards what it captures: the other ranks wait for them)
            return
        try:  # what `failsafe` does, without a context manager on every step
            cycle = self.cycle
            if cycle is not None:
                if self._cycle_end(cycle) if capture.capturing else self._cycle_begin(cycle, source):
                    return
                self.cycle = None
            self._next(step)
            if capture.capturing:
                capture.capture_start(source)
        except Exception as e:
            with hook.failsafe(where):
                raise e

    def next_step(self, step: int | None = None) -> None:
        """The general path: the step before ends, a step numbered `step` (if given) begins."""
        self._next(step)

    def set_step(self, step: int, mode: Any = None) -> None:
        """A step the framework numbers itself (XGBoost rounds), in `mode` if given. Its
        capture is not decided: the framework saves what it has at once."""
        cursor = self.cursor
        cursor.quiet_left = 0
        self.end()
        cursor.set_step(step, mode)
        self._begin()

    # -- the general path -------------------------------------------------------------------------

    def _next(self, step: int | None) -> None:
        self._repeated = None
        self.end()  # (ends the step before: `_flush` may set `_repeated`)
        hook = self.hook
        cursor = self.cursor
        if hook.training_state is not None and hook.chief:
            hook.training_state.maybe_record(cursor.step, cursor.mode_steps, self.last_saved_step)
        if step is None or step == cursor.step + 1:
            cursor.advance()
        else:
            cursor.advance_to(step)
        self._begin()
        repeated, self._repeated = self._repeated, None
        plans, capture = self.plans, self.capture
        # (a sharded model's ranks all capture: its reductions and gathers are collectives)
        collective = capture.collective
        capturing = capture.capturing = (
            bool(plans.saving) and (hook.writes or hook.dry_run or collective)
            and (not hook.disabled or collective))
        if capturing:
            rec = capture.record
            if rec is not None:
                self._start_replay(rec)
            capture.attach_capture(plans.saving_ids)
        else:
            capture.detach_capture()
            self.quiet_steps_ahead()
            if repeated is not None:
                self.cycle = self._take_cycle(*repeated)

    def _begin(self) -> None:
        """The new step's collections and pending step; values saved before the first step
        go into it."""
        hook = self.hook
        if not hook.prepared:
            hook.prepare_first_step()
        plans = self.plans
        if not self.deferred and self.cursor.in_quiet_window():
            if plans.saving:  # the step before saved; this one is the first quiet step
                plans.set_saving([])
        else:
            self.select_saving()
            if plans.saving and hook.writes:
                cursor = self.cursor
                self.pending = PendingStep(cursor.step, hook.worker, cursor.mode, cursor.mode_step)
                hook.side_outputs.saving_step()
            deferred, self.deferred = self.deferred, []
            for replay in deferred:
                replay()
        self.capture.step_began()

    def select_saving(self) -> None:
        """The included collections that save this step."""
        plans = self.plans
        saving = self.cursor.select(plans.included)
        if saving or plans.saving:  # most steps save nothing, like the step before
            plans.set_saving(saving)

    def quiet_steps_ahead(self) -> int:
        """Set the countdown: how many of the next steps can start without any of the work of
        a step's start (none of them saves, and nothing of this step will be pending).
        Anything that could change the answer (a mode, a scalar, a schedule, a collection)
        ends the countdown."""
        hook = self.hook
        if (self.pending is not None or self.plans.saving or self.deferred
                or hook.training_state is not None or hook.disabled or hook.closed):
            self.cursor.quiet_left = 0
            return 0
        return self.cursor.steps_ahead()

    def _start_replay(self, rec: Record) -> None:
        """Replay the record in this saving step if nothing it relies on has changed."""
        sw = self.pending
        hook = self.hook
        if (sw is not None and not len(sw) and rec.plan_cache is self.plans.cache
                and not hook.side_outputs.raw_wanted and rec.repeatable_by(hook.trial_writer)
                and rec.ready()):
            self.capture.begin_replay(rec)

    # -- the step's end ---------------------------------------------------------------------------

    def end(self) -> None:
        """The step ends: what it captured goes into its pending step, which goes to the writer
        (its files appear once written)."""
        capture = self.capture
        capture.capturing = False
        hook = self.hook
        if capture.holds():
            if hook.disabled:
                capture.discard()
            else:
                try:  # what `failsafe` does, without a context manager on every saved step
                    self._flush()
                except Exception as e:
                    with hook.failsafe("end_step"):
                        raise e
        sw = self.pending
        self.pending = None
        if sw is None or hook.disabled:
            return
        if len(sw):
            template = hook.trial_output.writer_for_step().submit(sw)
            if sw.on_submitted is not None:
                sw.on_submitted(template)
            self.last_saved_step = sw.step
            hook.maybe_export_collections()
            hook.report_unmatched(first_only=True)
        hook.side_outputs.step_ended()

    def _flush(self) -> None:
        capture, hook, sw = self.capture, self.hook, self.pending
        rec = capture.replayed()
        if rec is not None and sw is not None and not len(sw) and rec.repeatable_by(hook.trial_writer):
            # The step is the record's again: the writer is told only its numbers.
            capture.end_replay()
            plans = self.plans
            self._repeated = (plans.saving, plans.saving_ids, plans.cache, capture.attached(), rec)
            rec.repeat_as(sw)
            sw.on_submitted = functools.partial(_record_used, rec, sw)
            return
        rec = capture.flush(sw, sw is not None and hook.writes and not hook.side_outputs.live)
        if rec is not None:  # the next saving step like this one may replay it
            rec.plan_cache = self.plans.cache
            sw.on_written = rec.written  # type: ignore[union-attr]
            sw.on_submitted = functools.partial(self._adopt, rec, sw)  # type: ignore[union-attr]

    def _adopt(self, rec: Record, sw: PendingStep, template: object) -> None:
        """The recorded step was submitted: with a writer's template to repeat, it becomes the
        record that later saving steps replay."""
        rec.used_by(sw.token)
        if template is None or not rec.adopt(template, self.hook.trial_writer):
            rec.drop()
            return
        self.capture.keep_record(rec)

    # -- values saved outside the schedule ----------------------------------------------------------

    def scalar_pending(self) -> PendingStep:
        """The current step's pending step, made for a value saved outside the schedule (a
        scalar): the step now has something to hand over when it ends."""
        self.cursor.quiet_left = 0
        if self.pending is None:
            cursor, hook = self.cursor, self.hook
            self.pending = PendingStep(max(cursor.step, 0), hook.worker, cursor.mode,
                                       max(cursor.mode_step, 0))
        return self.pending

    def recheck_saving(self) -> None:
        """The collections changed within the step: which of them save it, again."""
        self.cursor.quiet_left = 0
        self.select_saving()
        cursor, hook = self.cursor, self.hook
        if self.plans.saving and hook.writes and self.pending is None and cursor.step >= 0:
            self.pending = PendingStep(cursor.step, hook.worker, cursor.mode, cursor.mode_step)

    def end_countdown(self) -> None:
        """Something changed: the next step starts in full."""
        self.cursor.quiet_left = 0

    def halt(self) -> None:
        """Capture stops and nothing decided before holds (the framework's hooks are gone)."""
        self.capture.capturing = False
        self.cursor.quiet_left = 0
        self.cycle = None

    def stop(self) -> None:
        """The hook is disabled: nothing more is pending or counted down."""
        self.halt()
        self.pending = None

    # -- the steady cycle (see `steady_cycle`) -----------------------------------------------------

    def _take_cycle(self, saving: list, ids: frozenset[int], plan_cache: dict, attached: Any,
                    rec: Record) -> SteadyCycle | None:
        """The cycle just completed, as a `SteadyCycle`, if the next one can be carried out
        without the general path: one schedule that all included collections save by, nothing
        else written at a saving step (TensorBoard, SageMaker metrics, training state), every
        saving collection's names settled, and the framework able to (`Capture.cycle_parts`)."""
        hook, cursor, plans = self.hook, self.cursor, self.plans
        mode = cursor.mode
        if (hook.side_outputs.live or hook.training_state is not None or not hook.writes
                or self.pending is not None or plans.saving or self.deferred
                or not hook.names_settled(ids) or plans.cache_for(ids) is not plan_cache):
            return None
        window = cursor.window(mode)
        schedules, members = cursor.schedule(mode, plans.included)
        # (this step lies in the quiet window the saving step opened, which ends at a saving step)
        if (window is None or window[2] == _INF or len(schedules) != 1
                or len(members) != len(saving)
                or any(c is not s for (c, _), s in zip(members, saving, strict=True))):
            return None
        parts = self.capture.cycle_parts(ids, plan_cache, rec, attached)
        if parts is None:
            return None
        return SteadyCycle(cursor.epoch, mode, schedules[0], saving, ids, plan_cache,
                           plans.saving_ids, plans.cache, rec, parts, int(window[2]))

    def _cycle_begin(self, cycle: SteadyCycle, source: Any) -> bool:
        """Start the cycle's next saving step, as the general path would, if nothing the cycle
        relies on has changed; False: the general path starts it."""
        cursor, plans, hook = self.cursor, self.plans, self.hook
        mode = cursor.mode
        mode_step = cursor.mode_steps.get(mode, -1) + 1
        rec = cycle.record
        # (the schedule is the one the cycle was decided under: the step due is a saving step)
        if (mode_step != cycle.due or mode is not cycle.mode or cursor.epoch != cycle.generation
                or self.pending is not None or plans.saving or self.deferred
                or plans.cache_for(cycle.saving_ids) is not cycle.plan_cache
                or not rec.repeatable_by(hook.trial_writer) or not rec.ready()
                or not self.capture.cycle_begin(cycle.parts, source, rec)):
            return False
        following = cycle.schedule.next_save_step(mode_step + 1)
        step = cursor.advance()
        plans.restore(cycle.saving, cycle.saving_ids, cycle.plan_cache)
        cursor.open_window(mode, mode_step, _INF if following is None else following)
        self.pending = PendingStep(step, hook.worker, mode, mode_step)
        self.capture.capturing = True
        return True

    def _cycle_end(self, cycle: SteadyCycle) -> bool:
        """End the cycle's saving step and start the quiet step after it, as the general path
        would, if the step replayed its record and nothing else; False: the general path."""
        rec = cycle.record
        sw = self.pending
        cursor, plans, hook, capture = self.cursor, self.plans, self.hook, self.capture
        mode = cursor.mode
        writer = hook.trial_writer
        if (sw is None or len(sw) or sw.step != cursor.step
                or mode is not cycle.mode or cursor.epoch != cycle.generation
                or plans.saving is not cycle.saving or self.deferred
                or plans.cache_for(cycle.quiet_ids) is not cycle.quiet_plan_cache
                or not rec.repeatable_by(writer)):
            return False
        mode_step = cursor.mode_steps[mode] + 1
        window = cursor.window(mode)
        if (window is None or not window[1] < mode_step < window[2]
                or not capture.cycle_end(cycle.parts, rec)):
            return False
        # The saving step is handed over as a repeat of the record (see `_flush`).
        capture.capturing = False
        self.pending = None
        rec.repeat_as(sw)
        writer.submit(sw)  # type: ignore[union-attr]
        rec.used_by(sw.token)
        self.last_saved_step = sw.step
        hook.trial_output.export_collections(hook.collection_manager)  # (`maybe_export_collections`)
        # The step after it saves nothing (see `_begin`).
        cursor.advance()
        plans.restore([], cycle.quiet_ids, cycle.quiet_plan_cache)
        self.quiet_steps_ahead()
        if window[2] == _INF:  # no collection saves again: no more cycles
            self.cycle = None
        else:
            cycle.due = int(window[2])
        return True


__all__ = ["Capture", "Record", "StepMachine"]
