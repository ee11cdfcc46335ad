"""A run's saving cycle, decided once and then only carried out.

In most runs each saving step is the last one again: the same collections save the same
parameters, loss and gradients into the same pooled buffers (a record of the step replays
them: PyTorch's `StepRecord`), the step goes to the writer process as a repeat, and the steps
in between save nothing. The general path still works all of that out at the saving step and
at the step after it: the schedule, the saving collections and their plans, whether the record
may replay, which hook dicts to change, the end-of-step checks. On the training thread, between
torch kernels that have evicted the interpreter's caches, every line of that costs about a
microsecond, and those two steps were most of the hook's own time.

A `SteadyCycle` keeps what one such cycle decided, taken once the general path has completed
it (`step_machine`). The next saving step then starts, and ends, with one set of guards
(nothing the cycle relies on has changed) followed by only the moves: counters, the pending
step, the repeat, and the framework's own moves (`Capture.cycle_begin`/`cycle_end`: hook dicts,
the replay). Whatever fails a guard (another mode, a new schedule or collection, a scalar, a
second backward pass, a record not yet written, another model) drops the cycle, and the step
takes the general path, which is always correct; a later cycle like it is taken again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smdebug_lite.config.save_config import SaveConfigMode
from smdebug_lite.modes import ModeKeys


@dataclass(slots=True)
class SteadyCycle:
    """What the last saving cycle decided (see the module docstring)."""

    generation: int  # the step cursor's schedule epoch it was decided under
    mode: ModeKeys
    schedule: SaveConfigMode  # the one schedule all included collections save by in `mode`
    saving: list  # the collections that save, with their ids and plan cache
    saving_ids: frozenset[int]
    plan_cache: dict
    quiet_ids: frozenset[int]  # the same for the steps that save nothing
    quiet_plan_cache: dict
    record: Any  # what the saving step replays, and whose writer repeats it (`step_machine.Record`)
    parts: Any  # what the framework attaches and captures for the saving step (`Capture.cycle_parts`)
    due: int  # the mode step of the next saving step


__all__ = ["SteadyCycle"]
