"""smdebug's per-module methods of the PyTorch Hook, which subclasses may override.

Scripts written for smdebug subclass its Hook and override ``forward_hook``, ``backward_hook``,
``fhook``, ``count_parameters``, ``_write_inputs`` or ``_write_outputs`` (which of them are
honoured is `extension`'s), and call ``_save_for_tensor`` and ``_write_raw_tensor_simple``.
`SmdebugMethods` holds them, with smdebug's names and call semantics, as a base of `Hook`. A
plain Hook never dispatches through them: its torch hooks are `torch_hooks`', its captures
`step_capture`'s. A subclass that overrides one gets it called as smdebug did, on every
module at every step (`_install_overrides`, decided at construction).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from smdebug_lite.pytorch import extension
from smdebug_lite.pytorch.torch_hooks import (
    GRADIENT_PREFIX,
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    HookCallback,
    Root,
    graph_task_id,
    torch_hook,
)

if TYPE_CHECKING:
    from smdebug_lite.pytorch.step_capture import StepCapture
    from smdebug_lite.pytorch.torch_hooks import TorchHooks

_FORWARD = ("forward_hook", "_write_inputs", "_write_outputs")


@dataclass(frozen=True)
class Overrides:
    """smdebug's methods a Hook subclass overrides, decided once at construction."""

    names: frozenset[str]
    forward: bool  # forward hooks on every module dispatch to `forward_hook`
    backward: bool  # parameters' gradients go through `backward_hook`

    @classmethod
    def of(cls, hook_class: type, base: type) -> Overrides:
        """Raises SMDebugTypeError for an override the hook would never call (`extension`)."""
        names = extension.overridden(hook_class, base)
        return cls(names, not names.isdisjoint(_FORWARD), "backward_hook" in names)


class SmdebugMethods:
    """smdebug's per-module methods (see the module docstring); a base of `Hook`, whose
    parts they use: `capture`, `torch_hooks`, `overrides`, `module_maps` and the core's."""

    capture: StepCapture
    torch_hooks: TorchHooks
    overrides: Overrides
    module_maps: dict[nn.Module, str]

    def _install_overrides(self, root: Root) -> None:
        """Hook `root` as smdebug did, for the methods this subclass overrides: `forward_hook`
        on every module, `fhook` on the model, `backward_hook(name)` on every parameter that
        requires a gradient; `count_parameters` is called."""
        for name, m in root.modules:
            m._module_name = name  # (smdebug 1.0.34's way of naming a module to its hooks)
        root.inner._module_name = root.name
        overrides, add = self.overrides, self.torch_hooks.ext_handles.append
        if overrides.forward:
            callback = torch_hook(functools.partial(self._call_override, "forward_hook"))
            for _, m in root.modules:
                add(m.register_forward_hook(callback))
        if "fhook" in overrides.names:
            fhook = torch_hook(functools.partial(self._call_override, "fhook"))
            add(root.module.register_forward_hook(fhook))
        if overrides.backward:
            for tname, p in root.params:
                if p.requires_grad:
                    callback = HookCallback(self._call_grad_hook, self.backward_hook(tname))
                    add(p.register_hook(callback))
        if "count_parameters" in overrides.names:
            self.count_parameters(root.inner)

    def _override_callback(self, method: str) -> HookCallback:
        """A torch hook that calls the subclass's `method` (see `_call_override`)."""
        return torch_hook(functools.partial(self._call_override, method))

    def _call_override(self, method: str, *args: Any) -> Any:
        """Run a method a subclass overrides, from a torch hook, under the failsafe. What it
        returns goes back to torch (a forward hook's result replaces the module's output)."""
        if self.disabled or self.closed:
            return None
        try:
            return getattr(self, method)(*args)
        except Exception as e:
            with self.failsafe(method):
                raise e
        return None

    def _call_grad_hook(self, fn: Callable[[torch.Tensor], Any], grad: torch.Tensor) -> Any:
        """A parameter's gradient callback made by an overridden `backward_hook` (its result,
        if not None, replaces the gradient, as with any tensor hook)."""
        if self.disabled or self.closed:
            return None
        try:
            return fn(grad)
        except Exception as e:
            with self.failsafe("backward_hook"):
                raise e
        return None

    # -- smdebug's methods ---------------------------------------------------------------------

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        """smdebug's forward hook of every module: save the module's inputs and outputs that the
        included collections select, through `_write_inputs` / `_write_outputs`.

        Called on every module of a registered model (and every registered loss) at every step
        only when a subclass overrides it or one of those two; a plain Hook hooks just the
        modules some collection selects, and only in saving steps."""
        if not self.capture.capturing:
            return
        name = self.module_maps.get(module)
        if name is not None:
            self._write_inputs(name, inputs)
            self._write_outputs(name, outputs)

    def fhook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        """smdebug's forward hook of a registered model (its profiler's): nothing to do here; a
        subclass's override is called after each forward pass of the model."""

    def backward_hook(self, tname: str) -> Callable[[torch.Tensor], None]:
        """A gradient callback for ``Tensor.register_hook``: saves the gradient it is given as
        ``gradient/<tname>`` in saving steps, when a collection selects that name (the last
        backward pass of a step wins). As in smdebug, e.g.
        ``outputs.register_hook(self.backward_hook(name + "_output"))`` in a `forward_hook`.

        A subclass that overrides it gets it called once per parameter that requires a gradient
        at `register_module` (``tname`` is the parameter's tensor name), and what it returns
        is registered on that parameter, instead of the hook's own gradient capture."""
        return HookCallback(self._save_gradient, GRADIENT_PREFIX + tname)

    def count_parameters(self, model: nn.Module) -> int:
        """The number of trainable parameter values of `model`; a subclass's override is
        called at `register_module`, as in smdebug."""
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    def _write_inputs(self, name: str, inputs: Any) -> None:
        """Save the tensors of `inputs` (tuples and lists flattened) as ``<name>_input_<i>``,
        where a collection selects them, in a saving step; `i` goes on counting over the calls
        of the step, as for a module called twice."""
        capture = self.capture
        if capture.capturing and graph_task_id() == -1:  # (not a checkpointed part computed again)
            try:
                capture.save_io(name, INPUT_SUFFIX, inputs)
            except Exception as e:
                with self.failsafe("_write_inputs"):
                    raise e

    def _write_outputs(self, name: str, outputs: Any) -> None:
        """`_write_inputs` for ``<name>_output_<i>``."""
        capture = self.capture
        if capture.capturing and graph_task_id() == -1:
            try:
                capture.save_io(name, OUTPUT_SUFFIX, outputs)
            except Exception as e:
                with self.failsafe("_write_outputs"):
                    raise e

    def _save_for_tensor(self, tensor_name: str, tensor_value: Any,
                         check_before_write: bool = True) -> None:
        """Save a value under `tensor_name` as the included collections that select it say, in
        a saving step. `check_before_write=False`: by every such collection, whether or not its
        schedule saves this step (as smdebug). A later save of the name in the step replaces it."""
        if not self.capture.capturing:
            return
        try:
            if check_before_write:
                plan = self.plan(tensor_name)
            else:
                plan = self.plans.plan_for(tensor_name, list(self.plans.matching(tensor_name)))
            if plan is None:
                return
            if isinstance(tensor_value, torch.Tensor):
                want_raw = plan.save_raw or self.side_outputs.wants_raw(plan)
                self.capture.buffer.capture(plan, tensor_value, want_raw, replace=True)
            else:
                arr = self._to_numpy(tensor_value)
                reductions = self._numpy_reductions(plan, arr)
                self.write(plan, raw=arr, reductions=reductions, shape=arr.shape)
        except Exception as e:
            with self.failsafe("_save_for_tensor"):
                raise e

    def _write_raw_tensor_simple(self, tensor_name: str, tensor_value: Any, tensor_ref: Any = None,
                                 timestamp: float | None = None) -> None:
        """Write a value as it is, in a saving step, in no collection (as smdebug: nothing is
        written outside saving steps, nor an empty value). A later write of the name in the
        step replaces it."""
        capture = self.capture
        if not capture.capturing:
            return
        try:
            if isinstance(tensor_value, torch.Tensor) and timestamp is None:
                if tensor_value.numel():
                    capture.buffer.capture(capture.value_plan(tensor_name), tensor_value, True,
                                           replace=True)
                return
            arr = self._to_numpy(tensor_value)
            sw = self.pending_step
            if arr.size and sw is not None:
                sw.add_tensor(tensor_name, arr, timestamp)
        except Exception as e:
            with self.failsafe("_write_raw_tensor_simple"):
                raise e

    def _save_gradient(self, name: str, grad: torch.Tensor | None) -> None:
        """What `backward_hook`'s callback does."""
        if not self.capture.capturing or grad is None:
            return
        try:
            plan = self.plan(name)
            if plan is not None:
                want_raw = plan.save_raw or self.side_outputs.wants_raw(plan)
                self.capture.buffer.capture(plan, grad, want_raw, replace=True)
        except Exception as e:
            with self.failsafe("backward_hook"):
                raise e


__all__ = ["Overrides", "SmdebugMethods"]
