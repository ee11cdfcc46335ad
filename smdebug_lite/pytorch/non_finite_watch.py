"""`detect_non_finite`: check every step for NaN/Inf, and record where the first one began.

Cheap enough to leave on. At every step (saving or not):

* each module's forward hook keeps a reference to its floating-point outputs (one Python call
  per module, no device work), the loss module's likewise;
* when the step's backward pass ends (an autograd engine callback, queued by a gradient hook on
  the model's last parameter) the model's outputs, the loss and every gradient go through ONE fused
  ``torch._foreach_norm`` (float32 accumulation) and the host reads one flag: the step's only
  synchronisation. A step without a backward pass is checked so at its end.

A NaN or Inf anywhere on the way to the model's output, the loss or a gradient makes that norm
non-finite (a parameter made non-finite by the optimizer shows in the next step's outputs).
Only then is the second pass run over what was kept, in order: the parameters (non-finite ones
were written by the previous step's update: phase ``weights``), the module outputs in forward
order, the loss, the gradients in backward order. The first tensor holding a NaN or Inf is the
offender (a finite norm that overflowed float32 finds none, and the run goes on). The step is
saved for the modules on the way (off the schedule, as a scalar is), the record written
(`writer.non_finite`), one warning logged, and the watch stands down: a worker writes one record.

The references are released at each check: module outputs live until the step's backward pass
ends instead of as it frees them. The parameters after the last update are checked at close.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from smdebug_lite.format.locations import non_finite_file_name
from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.log.logger import get_logger
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


def _floating(value: Any) -> list[tuple[int, torch.Tensor]]:
    """(index, tensor) of the floating-point tensors a module returned."""
    if isinstance(value, torch.Tensor):
        return [(0, value)] if value.is_floating_point() and value.numel() else []
    if isinstance(value, (tuple, list)):
        return [(i, t) for i, t in enumerate(value)
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    return []


def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every value of `tensors` is finite, with one fused reduction and one read (a
    norm overflowing float32 reads as non-finite: callers confirm with `counts`)."""
    norms = torch._foreach_norm(tensors, 2, dtype=torch.float32)
    try:
        stacked = torch.stack(norms)
    except RuntimeError:  # (tensors on several devices)
        device = norms[0].device
        stacked = torch.stack([n.to(device) for n in norms])
    return math.isfinite(stacked.sum().item())  # (a sum of finite norms overflows as they do)


def counts(t: torch.Tensor) -> tuple[int, int, int]:
    """NaN, +Inf and -Inf counts of `t`."""
    d = t.detach()
    return int(torch.isnan(d).sum()), int(torch.isposinf(d).sum()), int(torch.isneginf(d).sum())


class NonFiniteWatch:
    """The watch of one PyTorch hook (see the module docstring)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.handles: list[RemovableHandle] = []
        self.params: list[tuple[str, nn.Parameter, _Where]] = []  # forward (registration) order
        # every module's (output, where, inputs), in forward order: unpacked in the second pass
        self.outputs: list[tuple[Any, _Where, Any]] = []
        self.checked: list[torch.Tensor] = []  # the models' outputs and the loss: reduced
        self.losses: list[_Kept] = []
        self.previous: Identity | None = None  # the step before the current one
        self.backward_queued = False
        self.root_seen = False  # a model's output was kept: it stands for the module outputs
        self.done = False  # a record was written: the watch stands down

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
        for m, where in modules:
            callback = self._root_output if m is root.inner else self._output
            self.handles.append(m.register_forward_hook(HookCallback(callback, where)))
        # The first parameter a backward pass reaches (the last one) queues the check for the
        # backward pass's end: one Python call per backward pass, registered once.
        trained = [p for _, p in root.params if p.requires_grad]
        if trained:
            self.handles.append(trained[-1].register_post_accumulate_grad_hook(
                HookCallback(self._backward_started)))

    def watch_loss(self, loss_module: nn.Module, name: str) -> None:
        where = _Where(name, name, [])
        self.handles.append(loss_module.register_forward_hook(HookCallback(self._loss, where)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self._release()

    def _release(self) -> None:
        self.outputs = []
        self.checked = []
        self.losses = []
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

    def _root_output(self, where: _Where, module: nn.Module, inputs: Any, output: Any) -> None:
        if graph_task_id() != -1:
            return
        self._output(where, module, inputs, output)
        self.checked.extend(t.detach() for _, t in _floating(output))
        self.root_seen = True

    def _loss(self, where: _Where, module: nn.Module, inputs: Any, output: Any) -> None:
        if graph_task_id() != -1:
            return
        for i, t in _floating(output):
            self.losses.append(_Kept(t, where, f"{where.name}{OUTPUT_SUFFIX}{i}", inputs))
            self.checked.append(t.detach())

    def _backward_started(self, param: torch.Tensor) -> None:
        if not self.backward_queued:
            self.backward_queued = True
            _queue_callback(self._backward_ended)

    def _backward_ended(self) -> None:
        try:  # what `failsafe` does, without a context manager at every step
            self.check([g for _, p, _ in reversed(self.params)
                        if (g := p.grad) is not None and g.is_floating_point() and g.numel()])
        except Exception as e:
            with self.hook.failsafe("detect_non_finite"):
                raise e

    def _grads(self) -> list[_Kept]:
        """The gradients now in the parameters' .grad, in backward order (as `check` got them)."""
        kept = []
        for tname, p, where in reversed(self.params):
            g = p.grad
            if g is not None and g.is_floating_point() and g.numel():
                kept.append(_Kept(g, where, GRADIENT_PREFIX + tname))
        return kept

    # -- steps -----------------------------------------------------------------------------------

    def boundary(self) -> None:
        """The current step ends (the next begins, or end_step): checked now if no backward
        pass checked it."""
        if self.done:
            return
        with self.hook.failsafe("detect_non_finite"):
            if self.checked or self.outputs:
                self.check([])
            if self.hook.step >= 0:
                self.previous = self._identity()

    def finish(self) -> None:
        """The hook closes: the last step, and the parameters after the last update."""
        if not self.done:
            with self.hook.failsafe("detect_non_finite"):
                self.checked.extend(p.detach() for _, p, _ in self.params
                                    if p.is_floating_point() and p.numel())
                self.previous = None  # (the last update is the current step's)
                self.check([])
        self.remove()

    def _identity(self) -> Identity:
        hook = self.hook
        return (max(hook.step, 0), hook.mode.name, max(hook.mode_step, 0))

    def check(self, grads: list[torch.Tensor]) -> None:
        """The step's one host synchronisation; the second pass only when it fails."""
        self.backward_queued = False
        tensors = self.checked + grads
        if not self.root_seen:  # (a loop that calls submodules only: every output is reduced)
            tensors += [k.tensor for k in self._module_outputs()]
        if tensors and not all_finite(tensors):
            self._locate(self._grads() if grads else [])
        self._release()

    # -- the first offender ----------------------------------------------------------------------

    def _locate(self, grads: list[_Kept]) -> None:
        current = self._identity()
        params = [_Kept(p.detach(), where, tname) for tname, p, where in self.params
                  if p.is_floating_point() and p.numel()]
        for phase, kept, identity in (("weights", params, self.previous or current),
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
        hook = self.hook
        k = kept[i]
        step, mode, mode_step = identity
        record = NonFiniteRecord(step=step, mode=mode, mode_step=mode_step, worker=hook.worker,
                                 phase=phase, module=k.where.path, tensor=k.name, nan=found[0],
                                 posinf=found[1], neginf=found[2], wall_time=time.time())
        self.done = True
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self._save_the_way(phase, kept, i)
        written = False if hook.dry_run else write_non_finite_record(hook.storage, record)
        where_to = f"{hook.out_dir.rstrip('/')}/{non_finite_file_name(record.worker)}"
        logger.warning("smdebug-lite: first non-finite value at %s; %s", record.describe(),
                       f"recorded in {where_to}" if written else
                       "not recorded (dry_run, or this worker has a record already)")

    def _save_the_way(self, phase: str, kept: list[_Kept], i: int) -> None:
        """Save the step for the modules on the way: the module outputs up to the offender
        (all of them past the forward pass), the offender's inputs and its module's
        parameters, the gradients up to it."""
        hook = self.hook
        if hook.dry_run or not hook.writes:
            return
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
        wall = time.time()
        pending = hook.scalar_pending_step()
        for name, t in chosen.items():
            if hook.plan(name) is None:  # (else the schedule saves it in this step already)
                pending.add_tensor(name, host_copy(t.detach()), wall)
