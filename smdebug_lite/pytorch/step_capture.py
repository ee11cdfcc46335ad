"""The PyTorch hook's side of a step: capture into a `StepBuffer`, flush into the pending step.

The step machine (`hooks.step_machine`) decides when a step captures and calls this `Capture`:
attach the torch hooks the saving collections need (`torch_hooks`), read the registered
models' parameters as the step starts, and at the step's end hand the snapshots to the pending
step (one host transfer for all reductions). The torch callbacks (a module's forward hook, a
parameter's gradient hook) run here too, and return at once unless the step captures.

A completed step whose captures were all plain copies into pooled buffers becomes a record
(`step_record`) that later saving steps like it replay; which record, and when, is the step
machine's decision.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from smdebug_lite.hooks.core import TensorPlan
from smdebug_lite.hooks.step_machine import Capture
from smdebug_lite.pytorch.capture import StepBuffer
from smdebug_lite.pytorch.step_record import StepRecord
from smdebug_lite.pytorch.torch_hooks import (
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    HookCallback,
    Root,
    TorchHooks,
    graph_task_id,
    torch_hook,
)
from smdebug_lite.writer import PendingStep

if TYPE_CHECKING:
    from smdebug_lite.hooks.core import HookCore

_FIRST = operator.itemgetter(0)
# Runs a function once the current backward pass has finished (how DDP finishes its buckets).
# A private API: without it, gradients are copied in their hooks as they come.
_queue_callback = getattr(getattr(torch.autograd.Variable, "_execution_engine", None), "queue_callback", None)


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Tensors of a module's inputs/outputs in smdebug's order (tuples and lists, depth first)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_in(v)


@dataclass(slots=True)
class CycleParts:
    """What a steady cycle's saving step attaches and captures (`StepCapture.cycle_parts`)."""

    saving_ids: frozenset[int]
    root: Root  # the registered model whose forward pass starts the step
    params: list  # its (plan, parameter) pairs saved at the step's start
    grads: list[tuple[int, Any, Any]]  # (id, parameter, callback) of the gradient hooks attached
    grad_ids: frozenset[int]


class StepCapture(Capture):
    """The PyTorch hook's `Capture` (see the module docstring)."""

    def __init__(self, hook: HookCore, torch_hooks: TorchHooks) -> None:
        super().__init__()
        self.hook = hook
        self.torch_hooks = torch_hooks
        self.buffer = StepBuffer()
        self.collective = False  # a registered model holds DTensors: every rank captures
        self.io_counts: dict[str, int] = {}
        self.grads_pending: list[tuple[str, torch.Tensor]] = []  # see `grad_hook`
        self.value_plans: dict[str, TensorPlan] = {}  # of names written outside collections

    # -- the step machine's calls -------------------------------------------------------------

    def step_began(self) -> None:
        if self.io_counts:
            self.io_counts.clear()
        if self.grads_pending:  # a backward pass that failed never ran its end callback
            self.grads_pending = []

    def attach_capture(self, saving_ids: frozenset[int]) -> None:
        hooks = self.torch_hooks
        if hooks.grad_params:
            hooks.sync_grad_hooks(saving_ids)
        if not hooks.fwd_on:
            hooks.set_forward_hooks(True)

    def detach_capture(self) -> None:
        hooks = self.torch_hooks
        if hooks.grad_params and hooks.grad_attached:
            hooks.sync_grad_hooks(frozenset())
        if hooks.fwd_on:
            hooks.set_forward_hooks(False)

    def capture_start(self, roots: tuple[Root, ...] | list[Root]) -> None:
        """The parameters of `roots` (the models whose step this is), as the step starts."""
        raw = self.hook.side_outputs.raw_wanted
        for root in roots:
            self.buffer.capture_many(root.params_to_save(self.hook), raw)

    def holds(self) -> bool:
        return len(self.buffer) > 0

    def discard(self) -> None:
        self.buffer.drain()
        self.buffer.take_buffers()

    def flush(self, sw: PendingStep | None, recordable: bool) -> StepRecord | None:
        """Write what the step captured into `sw` (one host transfer for its reductions)."""
        buf, hook = self.buffer, self.hook
        buf.abort_replay()  # (a replay not completed: what it captured are ordinary captures)
        rec = None
        if len(buf):
            items = buf.drain()
            hook.write_step(items, time.time())  # one time for the step's tensors
            if recordable and len(sw) == len(items):  # type: ignore[arg-type]
                rec = buf.take_record(items)
        taken = buf.take_buffers()
        if taken:
            # Later snapshots go straight to the writer process's shared memory, if it has one.
            buf.buffers.writer_process = getattr(hook.trial_writer, "proc", None)
            if sw is not None and hook.writes and len(sw):  # (writes is False in a dry run)
                if rec is not None:
                    return rec
                # snapshot memory is reused once the writer has written the step
                sw.on_written = functools.partial(buf.buffers.give_back, taken)
        return None  # (otherwise nothing refers to the snapshots any more; they are freed)

    @property
    def record(self) -> StepRecord | None:
        return self.buffer.record

    def keep_record(self, record: StepRecord) -> None:  # type: ignore[override]
        old, self.buffer.record = self.buffer.record, record
        if old is not None:
            old.drop()

    def begin_replay(self, record: StepRecord) -> bool:  # type: ignore[override]
        return self.buffer.begin_replay(record)

    def replayed(self) -> StepRecord | None:
        return self.buffer.replayed()

    def end_replay(self) -> None:
        self.buffer.end_replay()

    def attached(self) -> frozenset[int]:
        return self.torch_hooks.grad_attached

    def cycle_parts(self, saving_ids: frozenset[int], plan_cache: dict, record: Any,
                    attached: Any) -> CycleParts | None:
        """One registered model, whose saved parameters and gradient hooks are the ones the
        repeated step had."""
        hooks = self.torch_hooks
        if (len(hooks.roots) != 1 or self.buffer.record is not record
                or hooks.grad_wanted.get(saving_ids) is not attached):
            return None
        root = hooks.roots[0]
        if root.saved_params is None or root.saved_params[0] is not plan_cache:
            return None
        grads = [(pid, p, callback) for pid, _, p, callback in hooks.grad_params if pid in attached]
        return CycleParts(saving_ids, root, root.saved_params[1], grads, attached)

    def cycle_begin(self, parts: CycleParts, roots: Any, record: Any) -> bool:
        """Nothing attached or pending, the same hooks wanted, the step begun by the cycle's
        model, `record` still the record: replay it, attach the hooks, copy the parameters."""
        hooks, buf = self.torch_hooks, self.buffer
        if (hooks.grad_attached or hooks.fwd_on or self.grads_pending
                or hooks.grad_wanted.get(parts.saving_ids) is not parts.grad_ids
                or len(roots) != 1 or roots[0] is not parts.root or buf.record is not record
                or not buf.begin_replay(record)):
            return False
        hooks.attach_grads(parts.grads, parts.grad_ids)
        hooks.set_forward_hooks(True)
        buf.capture_many(parts.params, False)
        return True

    def cycle_end(self, parts: CycleParts, record: Any) -> bool:
        """The step replayed `record` whole and no backward pass is left to copy: the replay
        ends and the hooks stand down."""
        if self.grads_pending or self.buffer.replayed() is not record:
            return False
        self.buffer.end_replay()
        self.io_counts.clear()
        hooks = self.torch_hooks
        hooks.detach_grads(parts.grads)
        hooks.set_forward_hooks(False)
        return True

    # -- torch callbacks ---------------------------------------------------------------------

    def io_callback(self, name: str) -> HookCallback:
        """The forward hook of a module (or loss) named `name`."""
        return torch_hook(functools.partial(self.forward_io, name))

    def forward_io(self, name: str, module: torch.nn.Module, inputs: Any, outputs: Any) -> None:
        if not self.capturing or graph_task_id() != -1:  # (a checkpointed part computed again)
            return
        try:  # what `failsafe` does, without a context manager on every call
            hooks = self.torch_hooks
            wants = hooks.io_wants_by_name.get(name)
            if wants is None:
                wants = hooks.io_wants_by_name[name] = hooks.io_wants(name)
            if wants[0]:
                self.save_io(name, INPUT_SUFFIX, inputs)
            if wants[1]:
                self.save_io(name, OUTPUT_SUFFIX, outputs)
        except Exception as e:
            with self.hook.failsafe("forward_hook"):
                raise e

    def grad_hook(self, grad_name: str):
        """The post-accumulate-grad hook of the parameter whose gradient is `grad_name`."""
        def on_grad_accumulated(param: torch.Tensor) -> None:
            if not self.capturing:
                return
            pending = self.grads_pending
            pending.append((grad_name, param))
            if len(pending) == 1:
                # The gradients of this backward pass are copied together once it has finished
                # (before user code can clip or zero them): one tight loop instead of Python
                # work between the pass's kernels.
                try:
                    _queue_callback(self.capture_pending_grads)
                except Exception:  # (no such API in this torch, or not inside a backward pass)
                    self.capture_pending_grads()

        return on_grad_accumulated

    def capture_pending_grads(self) -> None:
        """Snapshot the gradients accumulated by the backward pass that just ended. Several
        backward passes in one step: the accumulated gradient wins (`replace`)."""
        pending, self.grads_pending = self.grads_pending, []
        if not self.capturing:
            return
        try:  # what `failsafe` does, without a context manager in every backward pass
            names = tuple(map(_FIRST, pending))
            if self.buffer.replay_grads(names, [param.grad for _, param in pending]):
                return
            plan = self.hook.plan
            grads = [(p, g) for name, param in pending
                     if (g := param.grad) is not None and (p := plan(name)) is not None]
            self.buffer.capture_many(grads, self.hook.side_outputs.raw_wanted, replace=True,
                                     names=names if len(grads) == len(names) else ())
        except Exception as e:
            with self.hook.failsafe("gradient hook"):
                raise e

    # -- captures ------------------------------------------------------------------------------

    def save_io(self, name: str, suffix: str, value: Any) -> None:
        """The tensors of a module's inputs or outputs, as ``<name><suffix><i>``: `i` goes on
        counting over the calls of the step, as for a module called twice."""
        key = name + suffix
        idx = self.io_counts.get(key, 0)
        hook = self.hook
        for t in (value,) if isinstance(value, torch.Tensor) else tensors_in(value):
            plan = hook.plan(f"{key}{idx}")
            idx += 1
            if plan is not None:
                self.buffer.capture(plan, t, plan.save_raw or hook.side_outputs.wants_raw(plan))
        self.io_counts[key] = idx

    def value_plan(self, name: str) -> TensorPlan:
        """The plan of a value written as it is under `name`, in no collection."""
        plan = self.value_plans.get(name)
        if plan is None:
            plan = self.value_plans[name] = TensorPlan(name, save_raw=True)
        return plan


__all__ = ["CycleParts", "StepCapture", "tensors_in"]
