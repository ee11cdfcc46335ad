"""`detect_non_finite`: check every step for NaN/Inf, and record where the first one began.

Cheap enough to leave on. At every step (saving or not):

* each module's forward hook keeps a reference to its floating-point outputs (one Python call
  per module, no device work); the model's outputs and the loss are summed as they are made,
  into slots of one preallocated float32 tensor per device;
* each gradient is summed into its slot as the backward pass accumulates it (a gradient hook
  per parameter), while it is still in the processor's cache: reading every gradient again
  when the backward pass ends costs several times more on a CPU, where it comes back from
  memory;
* when the backward pass ends (an autograd engine callback, queued by the first gradient hook)
  the slots are summed and the host reads that one value: the step's only synchronisation. A
  step without a backward pass is checked so at its end.

A sum of finite values is finite unless it overflows float32 (about 3e38), so a NaN or Inf
anywhere on the way to the model's output, the loss or a gradient makes the total non-finite
(a parameter made non-finite by the optimizer shows in the next step's outputs). Only then is
the second pass run over what was kept, in order: the parameters (non-finite ones were written
by the previous step's update: phase ``weights``), the module outputs in forward order, the
loss, the gradients in backward order. The first tensor holding a NaN or Inf is the offender (a
total that overflowed finds none: the slots are cleared and the run goes on). The step is saved
for the modules on the way (off the schedule, as a scalar is), the record written
(`writer.non_finite`), one warning logged, and the watch stands down: a worker writes one record.

A gradient offender is recorded once it is known to be applied, not when it is found:
mixed-precision training with a loss scaler (``GradScaler``, DeepSpeed's) overflows float16
gradients by design now and then, and the scaler then skips the update. The finding is held
(`_Held`) and a global optimizer step hook registered: a torch optimizer step records it. A
gradient still non-finite when the next step begins is being accumulated, and stays held; one
cleared without a torch optimizer step was skipped, if float16 values were in the step (a loss
scaler's overflow: dropped, and the watch goes on), or applied by the loop itself (recorded).

The references are released at each check: module outputs live until the step's backward pass
ends instead of as it frees them. The parameters after the last update are checked at close.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.optim.optimizer as torch_optimizer
from torch import nn
from torch.utils.hooks import RemovableHandle

from smdebug_lite.format.locations import non_finite_file_name
from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.log.logger import get_logger
from smdebug_lite.pytorch import compile_watch, sharded, step_call
from smdebug_lite.pytorch.capture import host_copy
from smdebug_lite.pytorch.torch_hooks import (
    GRADIENT_PREFIX,
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    HookCallback,
    Root,
    graph_task_id,
)
from smdebug_lite.writer.non_finite import write_non_finite_record

logger = get_logger(__name__)

# torch's autograd engine: queue_callback runs a function when the current backward pass ends
# (what DDP and FSDP use); no public name.
_queue_callback = torch.autograd.Variable._execution_engine.queue_callback
Identity = tuple[int, str, int]  # (step, mode name, mode step)
F32 = torch.float32
STRIDED = torch.strided
OUTPUT_SLOTS = 4  # slots per device for the model's outputs and the loss (more: summed at the end)


@dataclass(slots=True)
class _Where:
    """A watched module: the name the hook saves its tensors under and its path in the model."""

    name: str
    path: str
    params: list[tuple[str, nn.Parameter]]  # (the hook's name, parameter): its own only


@dataclass(slots=True)
class _Kept:
    """One tensor kept for the second pass: what it is and where it came from."""

    tensor: torch.Tensor
    where: _Where
    name: str
    inputs: Any = None  # (the module's inputs, for module outputs)
    param: nn.Parameter | None = None  # (the parameter, for gradients)


@dataclass(slots=True)
class _Held:
    """A gradient offender waiting for the optimizer to apply it (see the module docstring)."""

    record: NonFiniteRecord
    saved: list[tuple[str, np.ndarray]]  # the step for the modules on the way, host copies
    at: Identity  # the step they belong to
    param: nn.Parameter | None
    float16: bool  # float16 values in the step: a loss scaler's overflow is likely


class _Slots:
    """One float32 tensor on one device: a slot per watched gradient, then `OUTPUT_SLOTS` for
    the model's outputs and the loss of the current step (from `first_output`; `free` is the
    next one). A slot keeps its last sum: a stale one is finite, or the watch has stood down."""

    __slots__ = ("first_output", "free", "values", "views")

    def __init__(self, device: torch.device, grads: int) -> None:
        self.values = torch.zeros(grads + OUTPUT_SLOTS, dtype=F32, device=device)
        self.views = self.values.unbind()
        self.first_output = self.free = grads


def _floating(value: Any) -> list[tuple[int, torch.Tensor]]:
    """(index, tensor) of the floating-point tensors a module returned."""
    if isinstance(value, torch.Tensor):
        return [(0, value)] if value.is_floating_point() and value.numel() else []
    if isinstance(value, (tuple, list)):
        return [(i, t) for i, t in enumerate(value)
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    return []


def _sum(t: torch.Tensor) -> torch.Tensor:
    d = t.detach()
    if d.layout is not torch.strided:  # (a sparse gradient)
        d = d.coalesce().values()
    return d.sum(dtype=F32)


def counts(t: torch.Tensor) -> tuple[int, int, int]:
    """NaN, +Inf and -Inf counts of `t`."""
    d = t.detach()
    return int(torch.isnan(d).sum()), int(torch.isposinf(d).sum()), int(torch.isneginf(d).sum())


def _summable(p: nn.Parameter) -> bool:
    """Whether `p`'s gradient can be summed into a slot (a plain dense tensor's can)."""
    return p.requires_grad and p.is_floating_point() and not sharded.is_dtensor(p)


class NonFiniteWatch:
    """The watch of one PyTorch hook (see the module docstring)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.handles: list[RemovableHandle] = []
        # modules whose outputs an OutputCall records (`step_call`): (module, call, record)
        self.calls: list[tuple[nn.Module, step_call.OutputCall, HookCallback]] = []
        self.posts: list[step_call.StepCall] = []  # step calls that pass on a model's outputs
        self.hooks_only = False  # dynamo compiles: forward hooks only (`keep_forward_hooks`)
        self.params: list[tuple[str, nn.Parameter, _Where]] = []  # forward (registration) order
        self.slots: list[_Slots] = []
        self.output_slots: dict[torch.device, _Slots] = {}  # where the outputs of a device go
        self.unslotted: list[nn.Parameter] = []  # (DTensors, frozen): gradients summed at the end
        # every module's (output, where, inputs), in forward order: unpacked in the second pass
        self.outputs: list[tuple[Any, _Where, Any]] = []
        self.late: list[torch.Tensor] = []  # outputs beyond the slots: summed at the check
        self.losses: list[_Kept] = []
        self.previous: tuple[int, Any, int] | None = None  # the step before the current one
        self.pending = False  # something of the current step is in the slots, unchecked
        self.backward_queued = False
        self.root_seen = False  # a model's output was kept: it stands for the module outputs
        self.done = False  # a record was written: the watch stands down
        self.held: _Held | None = None  # a gradient offender the optimizer has not applied yet
        self.optimizer_handle: RemovableHandle | None = None  # (while a gradient is held)

    # -- attaching -------------------------------------------------------------------------------

    def watch_root(self, root: Root) -> None:
        """Watch a registered model: every module's outputs, its parameters and gradients."""
        by_path: dict[str, _Where] = {}
        modules = []
        for path, m in root.inner.named_modules():
            where = _Where(root.name if path == "" else path, path, [])
            by_path[path] = where
            modules.append((m, where))
        for tname, p in root.params:
            where = by_path.get(tname[len(root.name) + 1:].rpartition(".")[0], by_path[""])
            where.params.append((tname, p))
            self.params.append((tname, p, where))
        if not compile_watch.watch(self):
            self.hooks_only = True
        for m, where in modules:
            if m is not root.inner:
                self._watch_module(m, HookCallback(self._output, where))
                continue
            record = HookCallback(self._root_output, where)
            call = root.step_call  # (the hook's own call of the model: passes its outputs on)
            if not self.hooks_only and call is not None and root.module is m and call.post is None:
                call.post = record
                self.posts.append(call)
            else:
                self._watch_module(m, record)
        # Each gradient is summed into its slot as it is accumulated; the first queues the
        # check for the backward pass's end.
        by_device: dict[torch.device, list[nn.Parameter]] = {}
        unslotted = []
        for p in dict.fromkeys(p for _, p in root.params):  # (a shared parameter once)
            if _summable(p):
                by_device.setdefault(p.device, []).append(p)
            elif p.is_floating_point():
                unslotted.append(p)
        for device, params in by_device.items():
            slots = _Slots(device, len(params))
            self.slots.append(slots)
            self.output_slots[device] = slots
            for p, view in zip(params, slots.views, strict=False):
                self.handles.append(p.register_post_accumulate_grad_hook(
                    HookCallback(self._grad_summed, view)))
        self.unslotted.extend(unslotted)
        trained = [p for p in unslotted if p.requires_grad]
        if trained:  # (the first gradient hook queues the check)
            self.handles.append(trained[-1].register_post_accumulate_grad_hook(
                HookCallback(self._backward_started)))

    def _watch_module(self, m: nn.Module, record: HookCallback) -> None:
        """Keep `m`'s outputs: through an `OutputCall` (torch's hook-free path) if it can be
        installed, else a forward hook."""
        call = None if self.hooks_only else step_call.install_output_call(m, record)
        if call is not None:
            self.calls.append((m, call, record))
        else:
            self.handles.append(m.register_forward_hook(record))

    def _unhook_calls(self) -> list[tuple[nn.Module, HookCallback]]:
        """Take the OutputCalls and step-call posts off: (module, record) of each."""
        taken = []
        for m, call, record in self.calls:
            step_call.uninstall(m, call)
            taken.append((m, record))
        for call in self.posts:
            taken.append((call.module, call.post))
            call.post = None
        self.calls = []
        self.posts = []
        return taken

    def keep_forward_hooks(self) -> None:
        """Dynamo is about to trace (`compile_watch`): forward hooks, which it traces as
        such, instead of the calls."""
        self.hooks_only = True
        for m, record in self._unhook_calls():
            if not self.done:
                self.handles.append(m.register_forward_hook(record))

    def auto_steps_stopped(self) -> None:
        """The hook's step calls are gone (`Hook.start_step`): the model outputs they passed
        on are kept another way."""
        posts, self.posts = self.posts, []
        for call in posts:
            record, call.post = call.post, None
            if not self.done:
                self._watch_module(call.module, record)

    def watch_loss(self, loss_module: nn.Module, name: str) -> None:
        where = _Where(name, name, [])
        self.handles.append(loss_module.register_forward_hook(HookCallback(self._loss, where)))

    def remove(self) -> None:
        self._detach()
        self._stop_watching_optimizers()
        compile_watch.unwatch(self)
        self._release()

    def _detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self._unhook_calls()

    def _release(self) -> None:
        self.outputs.clear()
        self.late.clear()
        self.losses.clear()
        for slots in self.slots:
            slots.free = slots.first_output
        self.pending = False
        self.backward_queued = False
        self.root_seen = False

    # -- torch callbacks -------------------------------------------------------------------------

    def _output(self, where: _Where, module: nn.Module, inputs: Any, output: Any) -> None:
        if graph_task_id() == -1:  # (else a checkpointed module computed again in backward)
            self.outputs.append((output, where, inputs))

    def _module_outputs(self) -> list[_Kept]:
        """The kept module outputs, as tensors named as the hook saves them."""
        return [_Kept(t, where, f"{where.name}{OUTPUT_SUFFIX}{i}", inputs)
                for output, where, inputs in self.outputs for i, t in _floating(output)]

    def _sum_output(self, t: torch.Tensor) -> None:
        """Sum a model output or a loss into its device's next free slot."""
        d = t.detach()
        slots = self.output_slots.get(d.device)
        if slots is None:
            slots = self.output_slots[d.device] = _Slots(d.device, 0)
            self.slots.append(slots)
        i = slots.free
        if i < len(slots.views):
            torch.sum(d, dim=None, dtype=F32, out=slots.views[i])
            slots.free = i + 1
        else:
            self.late.append(d)
        self.pending = True

    def _root_output(self, where: _Where, module: nn.Module, inputs: Any, output: Any) -> None:
        if graph_task_id() != -1:
            return
        self.outputs.append((output, where, inputs))
        for _, t in _floating(output):
            self._sum_output(t)
        self.root_seen = True

    def _loss(self, where: _Where, module: nn.Module, inputs: Any, output: Any) -> None:
        if graph_task_id() != -1:
            return
        for i, t in _floating(output):
            self.losses.append(_Kept(t, where, f"{where.name}{OUTPUT_SUFFIX}{i}", inputs))
            self._sum_output(t)

    def _grad_summed(self, slot: torch.Tensor, param: torch.Tensor) -> None:
        try:  # what `failsafe` does, without a context manager at every gradient
            g = param.grad
            if g is not None:
                if g.requires_grad:  # (a backward pass with create_graph=True)
                    g = g.detach()
                if g.layout is STRIDED:
                    torch.sum(g, dim=None, dtype=F32, out=slot)
                else:
                    self.late.append(g)
            if not self.backward_queued:
                self.backward_queued = True
                _queue_callback(self._backward_ended)
        except Exception as e:
            with self.hook.failsafe("detect_non_finite"):
                raise e

    def _backward_started(self, param: torch.Tensor) -> None:
        if not self.backward_queued:
            self.backward_queued = True
            _queue_callback(self._backward_ended)

    def _backward_ended(self) -> None:
        try:  # what `failsafe` does, without a context manager at every step
            self.check(backward=True)
        except Exception as e:
            with self.hook.failsafe("detect_non_finite"):
                raise e

    def _grads(self) -> list[_Kept]:
        """The gradients now in the parameters' .grad, in backward order."""
        kept = []
        for tname, p, where in reversed(self.params):
            g = p.grad
            if g is not None and g.is_floating_point() and g.numel():
                kept.append(_Kept(g, where, GRADIENT_PREFIX + tname, param=p))
        return kept

    # -- steps -----------------------------------------------------------------------------------

    def boundary(self) -> None:
        """The current step ends (the next begins, or end_step): checked now if no backward
        pass checked it."""
        if self.done:
            return
        try:  # what `failsafe` does, without a context manager at every step
            if self.held is not None:
                self._settle_held(closing=False)
            if self.pending or self.outputs:
                self.check()
            hook = self.hook
            if hook.step >= 0:
                self.previous = (hook.step, hook.mode, hook.mode_step)
        except Exception as e:
            with self.hook.failsafe("detect_non_finite"):
                raise e

    def finish(self) -> None:
        """The hook closes: the last step, and the parameters after the last update."""
        if not self.done and self.held is not None:
            with self.hook.failsafe("detect_non_finite"):
                self._settle_held(closing=True)
        if not self.done:
            with self.hook.failsafe("detect_non_finite"):
                self.late.extend(p.detach() for _, p, _ in self.params
                                 if p.is_floating_point() and p.numel())
                self.previous = None  # (the last update is the current step's)
                self.check()
        self.remove()

    def _identity(self, raw: tuple[int, Any, int] | None = None) -> Identity:
        hook = self.hook
        step, mode, mode_step = raw or (hook.step, hook.mode, hook.mode_step)
        return (max(step, 0), mode.name, max(mode_step, 0))

    def check(self, backward: bool = False) -> None:
        """The step's one host synchronisation; the second pass only when it fails."""
        self.backward_queued = False
        late = self.late
        if backward:
            late += [g for p in reversed(self.unslotted)
                     if (g := p.grad) is not None and g.is_floating_point() and g.numel()]
        if not self.root_seen:  # (a loop that calls submodules only: every output is reduced)
            late += [k.tensor for k in self._module_outputs()]
        if len(self.slots) == 1 and not late:  # (one device: its slots are read as they are)
            finite = math.isfinite(sum(self.slots[0].values.tolist()))
        else:
            total: torch.Tensor | None = None
            for slots in self.slots:
                part = slots.values.sum()
                total = part if total is None else total + part.to(total.device)
            if late:
                part = torch.stack([_sum(t).to(late[0].device) for t in late]).sum()
                total = part if total is None else total + part.to(total.device)
            finite = total is None or math.isfinite(total.item())
        if not finite:
            self._locate(self._grads() if backward else [])
            if not self.done:  # (a sum that overflowed: nothing non-finite; start afresh)
                for slots in self.slots:
                    slots.values.zero_()
        self._release()

    # -- the first offender ----------------------------------------------------------------------

    def _locate(self, grads: list[_Kept]) -> None:
        current = self._identity()
        previous = self._identity(self.previous) if self.previous is not None else current
        params = [_Kept(p.detach(), where, tname) for tname, p, where in self.params
                  if p.is_floating_point() and p.numel()]
        for phase, kept, identity in (("weights", params, previous),
                                      ("forward", self._module_outputs(), current),
                                      ("loss", self.losses, current),
                                      ("backward", grads, current)):
            for i, k in enumerate(kept):
                found = counts(k.tensor)
                if any(found):
                    self._found(phase, identity, kept, i, found)
                    return

    def _found(self, phase: str, identity: Identity, kept: list[_Kept], i: int,
               found: tuple[int, int, int]) -> None:
        k = kept[i]
        if phase == "backward" and self.held is not None:
            return  # (the held gradient, accumulated again: it is earlier)
        step, mode, mode_step = identity
        record = NonFiniteRecord(step=step, mode=mode, mode_step=mode_step,
                                 worker=self.hook.worker, phase=phase, module=k.where.path,
                                 tensor=k.name, nan=found[0], posinf=found[1], neginf=found[2],
                                 wall_time=time.time())
        saved = self._the_way(phase, kept, i)
        if phase == "backward":
            float16 = k.tensor.dtype is torch.float16 or any(
                o.tensor.dtype is torch.float16 for o in self._module_outputs())
            self.held = _Held(record, saved, self._identity(), k.param, float16)
            if self.optimizer_handle is None:
                self.optimizer_handle = torch_optimizer.register_optimizer_step_post_hook(
                    HookCallback(self._optimizer_stepped))
            return
        self.held = None  # (a gradient not applied yet: this one is where things went wrong)
        self._record(record, saved, self._identity())

    def _optimizer_stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """A torch optimizer stepped: the held gradient is applied. (The hook is not removed
        here, as torch walks its global hooks while it calls them: a finding settled at a step
        boundary removes it, a recorded one leaves it until the watch is removed.)"""
        held = self.held
        if held is not None and not self.done:
            with self.hook.failsafe("detect_non_finite"):
                self.held = None
                self._record(held.record, held.saved, held.at)

    def _stop_watching_optimizers(self) -> None:
        if self.optimizer_handle is not None:
            self.optimizer_handle.remove()
            self.optimizer_handle = None

    def _settle_held(self, closing: bool) -> None:
        """A new step begins (or the hook closes) and no torch optimizer applied the held
        gradient: still non-finite, it is being accumulated (held on); else dropped if a loss
        scaler skipped the update (float16 values in the step), recorded if not (the loop
        updates the parameters itself)."""
        held = self.held
        g = held.param.grad if held.param is not None else None
        if not closing and g is not None and not bool(torch.isfinite(g.detach()).all()):
            return
        self.held = None
        self._stop_watching_optimizers()
        if not held.float16:
            self._record(held.record, held.saved, held.at)
        else:
            logger.info("smdebug-lite: the non-finite gradient %s of step %d was not applied "
                        "(the optimizer step was skipped, as a loss scaler does when float16 "
                        "gradients overflow): not recorded", held.record.tensor, held.record.step)

    def _record(self, record: NonFiniteRecord, saved: list[tuple[str, np.ndarray]],
                at: Identity) -> None:
        """Write the record and the tensors of step `at` (if it is still the current step: a
        gradient accumulated over steps is recorded without them), warn, and stand down."""
        hook = self.hook
        self.done = True
        self._detach()
        if saved and self._identity() == at:
            wall = time.time()
            pending = hook.scalar_pending_step()
            for name, value in saved:
                if hook.plan(name) is None:  # (else the schedule saves it in this step already)
                    pending.add_tensor(name, value, wall)
        written = False if hook.dry_run else write_non_finite_record(hook.storage, record)
        where_to = f"{hook.out_dir.rstrip('/')}/{non_finite_file_name(record.worker)}"
        logger.warning("smdebug-lite: first non-finite value at %s; %s", record.describe(),
                       f"recorded in {where_to}" if written else
                       "not recorded (dry_run, or this worker has a record already)")

    def _the_way(self, phase: str, kept: list[_Kept], i: int) -> list[tuple[str, np.ndarray]]:
        """Host copies of the step for the modules on the way: the module outputs up to the
        offender (all of them past the forward pass), the offender's inputs and its module's
        parameters, the gradients up to it."""
        hook = self.hook
        if hook.dry_run or not hook.writes:
            return []
        chosen: dict[str, torch.Tensor] = {}
        if phase != "weights":
            outputs = kept[:i + 1] if phase == "forward" else self._module_outputs()
            chosen.update((k.name, k.tensor) for k in outputs)
        if phase in ("loss", "backward"):
            chosen.update((k.name, k.tensor) for k in self.losses)
        if phase == "backward":
            chosen.update((k.name, k.tensor) for k in kept[:i + 1])
        k = kept[i]
        chosen[k.name] = k.tensor
        args = k.inputs
        if args is not None:
            for n, t in enumerate(args if isinstance(args, (tuple, list)) else (args,)):
                if isinstance(t, torch.Tensor):
                    chosen[f"{k.where.name}{INPUT_SUFFIX}{n}"] = t
        for tname, p in k.where.params:
            chosen[tname] = p
        return [(name, host_copy(t.detach())) for name, t in chosen.items()]
