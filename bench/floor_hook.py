"""A hand-written hook that does only the unavoidable part of bench_hook.py's PyTorch scenario.

At every `interval`-th forward pass of the model it copies the parameters the ``weights``
collection names (``*.weight``) into preallocated host buffers, the loss's output in the loss's
forward hook, and every gradient once the backward pass has finished (gradient hooks attached
for that step only, as smdebug-lite does). It writes nothing and decides nothing: no
collections, no schedule beyond a modulo, no writer. Paired with a plain twin like the real
hooks, it reads what any hook that saves these tensors at these points costs on the machine
(copies, cache effects, torch hook dispatch), so the real hooks' figures can be read against it.
"""

from __future__ import annotations

import torch
from torch import nn

_queue_callback = torch.autograd.Variable._execution_engine.queue_callback


class FloorHook:
    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.step = -1
        self.saving = False
        self.fired = 0

    def register_module(self, model: nn.Module) -> None:
        self.params = [p for _, p in model.named_parameters()]
        self.weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
        self.weight_copies = [torch.empty_like(p) for p in self.weights]
        self.grad_copies = [torch.empty_like(p) for p in self.params]
        model.register_forward_pre_hook(self._pre_hook)
        # (parameter, its hook dict, key): the callback goes in and out of the dict
        self.grad_slots = []
        for p in self.params:
            handle = p.register_post_accumulate_grad_hook(self._on_grad)
            self.grad_slots.append((p, handle.hooks_dict_ref(), handle.id))
        self._set_grad_hooks(False)

    def register_loss(self, loss_module: nn.Module) -> None:
        self.loss_copy = torch.empty(())
        handle = loss_module.register_forward_hook(self._on_loss)
        self.loss_slot = (handle.hooks_dict_ref(), handle.id, self._on_loss)
        self.loss_slot[0].pop(handle.id)

    def close(self) -> None:
        pass

    def _set_grad_hooks(self, on: bool) -> None:
        for p, hooks, key in self.grad_slots:
            if on:
                hooks[key] = self._on_grad
                p._post_accumulate_grad_hooks = hooks
            else:
                hooks.pop(key, None)
                p._post_accumulate_grad_hooks = None  # (an empty dict still costs a call)

    def _pre_hook(self, module: nn.Module, inputs) -> None:
        self.step += 1
        if self.saving:
            self.saving = False
            self._set_grad_hooks(False)
            self.loss_slot[0].pop(self.loss_slot[1], None)
        if self.step % self.interval == 0:
            self.saving = True
            with torch.no_grad():
                torch._foreach_copy_(self.weight_copies, self.weights)
            self._set_grad_hooks(True)
            self.loss_slot[0][self.loss_slot[1]] = self.loss_slot[2]
            self.fired = 0

    def _on_loss(self, module: nn.Module, inputs, output: torch.Tensor) -> None:
        self.loss_copy.copy_(output.detach())

    def _on_grad(self, param: torch.Tensor) -> None:
        self.fired += 1
        if self.fired == 1:
            _queue_callback(self._copy_grads)

    def _copy_grads(self) -> None:
        torch._foreach_copy_(self.grad_copies, [p.grad for p in self.params])
