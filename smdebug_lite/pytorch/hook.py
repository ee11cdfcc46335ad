"""The PyTorch hook: smdebug's API and tensor names, on modern PyTorch mechanisms.

* A step starts at every forward pass of a registered module (a forward pre-hook), per mode;
  or, in loops whose steps are not forward passes, where the loop calls `Hook.start_step`
  (from its first call on, forward passes begin no step). What a step does from there is the
  step machine's (`hooks.step_machine`): quiet steps only move the counters, and a run's saving
  cycle, once it repeats, is carried out without the general path's decisions
  (`hooks.steady_cycle`).
* Parameters are saved at the start of the step; gradients through
  ``Tensor.register_post_accumulate_grad_hook``, so frozen layers, shared parameters (one hook,
  saved once) and ``torch.compile``d models work, and no module backward hooks are needed.
  Gradient hooks are attached only while a step saves gradients: on other steps the backward
  pass runs no Python at all (one call per backward pass with ``detect_non_finite``).
* Module inputs/outputs are captured only for modules whose tensor names an included collection
  can match: other modules get no hook at all.
* Everything the hook installs is a ``RemovableHandle``; ``remove()`` (and ``close()``) detach
  all of it. Every callback runs inside the core's ``failsafe``: an internal error is logged once
  and disables the hook; training goes on.
* A subclass may override smdebug's per-module methods (``forward_hook``, ``backward_hook``, ...,
  see `extension`): the hook then calls them as smdebug did, on every module at every step. That
  is decided at construction; a plain Hook never dispatches through them.

The hook is thin; its parts are `torch_hooks` (torch handles and gradient slots),
`step_capture` (what a step captures and how it is flushed), `smdebug_methods` (smdebug's
overridable per-module methods, a base of `Hook`) and `non_finite_watch` (``detect_non_finite``:
every step checked for NaN/Inf, the first one recorded).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from smdebug_lite.config.collection import CollectionKeys
from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.hooks.arguments import check_start_step, hook_constructor
from smdebug_lite.hooks.core import SCALAR_PREFIX, HookCore
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.pytorch import compile_watch, sharded, workers
from smdebug_lite.pytorch.capture import StepBuffer, host_copy
from smdebug_lite.pytorch.collection import Collection, as_pytorch_collection
from smdebug_lite.pytorch.non_finite_watch import NonFiniteWatch
from smdebug_lite.pytorch.smdebug_methods import Overrides, SmdebugMethods
from smdebug_lite.pytorch.step_capture import StepCapture
from smdebug_lite.pytorch.torch_hooks import (
    GRADIENT_PREFIX,
    INPUT_SUFFIX,
    OUTPUT_SUFFIX,
    Inert,
    Root,
    TorchHooks,
    graph_task_id,
    torch_hook,
    unwrap_compiled,
)
from smdebug_lite.pytorch.torch_hooks import in_backward_pass as in_backward_pass  # (re-exported)

logger = get_logger(__name__)
# Models pickled with an earlier version name their inert hooks here (`torch_hooks.Inert`).
_Inert = Inert


class Hook(SmdebugMethods, HookCore):
    """``smdebug_lite.pytorch.Hook``: register a model (and losses); tensors are saved as the
    SaveConfig, collections and ReductionConfig say."""

    framework = "pytorch"
    detects_non_finite = True

    @hook_constructor()
    def __init__(self, shared: dict[str, Any]) -> None:
        self.torch_hooks = TorchHooks(self)
        self.capture = StepCapture(self, self.torch_hooks)
        # smdebug's methods this subclass overrides (see `extension`): forward hooks on every
        # module dispatch to `forward_hook`, and parameters' gradients go through `backward_hook`.
        self.overrides = Overrides.of(type(self), Hook)
        self.module_maps: dict[nn.Module, str] = {}  # every registered module and loss -> its name
        self._explicit_steps = False  # `start_step` was called: forward passes begin no step
        super().__init__(**shared)
        # `detect_non_finite`: every step checked for NaN/Inf (`non_finite_watch`)
        self.non_finite = NonFiniteWatch(self) if self.arguments.detect_non_finite else None
        self.collections_configured()

    def step_capture(self) -> StepCapture:
        return self.capture

    @property
    def step_buffer(self) -> StepBuffer:
        """What the current step has captured, until it is handed to the writer."""
        return self.capture.buffer

    def collections_configured(self) -> None:
        for coll in self.collection_manager.collections.values():
            as_pytorch_collection(coll)

    # -- worker identity -------------------------------------------------------------------------

    def _worker_name(self) -> str:
        return self._get_worker_name()

    def _num_workers(self) -> int:
        return self._get_num_workers()

    def _get_worker_name(self) -> str:
        """smdebug's name for this method (a subclass may override it)."""
        return workers.worker_name()

    def _get_num_workers(self) -> int:
        return workers.num_workers()

    # -- collections -----------------------------------------------------------------------------

    def get_collection(self, name: str, create: bool = True) -> Collection:
        return as_pytorch_collection(super().get_collection(name, create))

    def _prepare_collections(self) -> None:
        for coll in self.collection_manager.collections.values():
            modules = getattr(coll, "modules", None) or {}
            for module, (inputs, outputs) in modules.items():
                name = self.torch_hooks.module_name(module)
                if name is None:
                    logger.warning("Collection %r names a module that is not part of a registered "
                                   "model; its tensors cannot be saved", coll.name)
                    continue
                if inputs:
                    coll.include(name + INPUT_SUFFIX)
                if outputs:
                    coll.include(name + OUTPUT_SUFFIX)
        super()._prepare_collections()
        self._sync_hooks()

    def _unmatched_hint(self, coll: Collection) -> str:
        if coll.name == CollectionKeys.LOSSES:  # (included by default)
            return ("no loss was saved: register the loss module with hook.register_loss(loss_fn), "
                    "or save a loss computed by a function with hook.record_tensor_value('loss', loss)")
        if any(coll.matches(name) for _, name, _, _ in self.torch_hooks.grad_params):
            return ("no gradient reached a parameter's .grad in this step: gradients are saved as "
                    "backward() accumulates them there, not those torch.autograd.grad() returns")
        return super()._unmatched_hint(coll)

    # -- registration ----------------------------------------------------------------------------

    def register_module(self, module: nn.Module, auto_step: bool = True) -> None:
        """Make every forward pass of `module` a step and save its tensors as configured.

        ``auto_step=False``: its forward passes begin no step; the loop begins each one with
        `start_step` (for loops whose steps are not one forward pass of the model, when the
        model is called before the first `start_step`). After `start_step` has been called,
        every module is registered so.

        A ``torch.compile``d module can be registered before or after compiling; names are the
        original model's (``<ModelClass>_<parameter path>``)."""
        if not isinstance(module, nn.Module):
            raise SMDebugTypeError(
                f"register_module: module={type(module).__name__} must be a torch.nn.Module"
            )
        if not isinstance(auto_step, bool):
            raise SMDebugTypeError(
                f"register_module: auto_step={auto_step!r} must be True or False")
        with self.failsafe("register_module"):
            inner = unwrap_compiled(module)
            if self.torch_hooks.registered(module, inner):
                logger.warning("register_module: %s is already registered; ignored", inner._get_name())
                return
            # (FSDP2's FSDP<Class> keeps <Class>'s names)
            root_name = sharded.unwrapped_class_name(inner) or inner._get_name()
            params = [(f"{root_name}_{n}", p) for n, p in inner.named_parameters()]
            if any(sharded.is_dtensor(p) for _, p in params):
                self.capture.collective = True  # (its reductions and gathers are collectives)
            modules = [(root_name, module) if n == "" else (n, m) for n, m in inner.named_modules()]
            compiled = compile_watch.compiled_before(type(m) for _, m in inner.named_modules())
            if compiled:
                logger.warning(
                    "register_module: torch.compile compiled the forward of %s earlier in this "
                    "process, and dynamo reuses that code without checking module hooks: module "
                    "inputs and outputs may go unsaved. Call torch._dynamo.reset() before "
                    "registering (docs/pytorch.md, torch.compile).", ", ".join(compiled))
            root = Root(module, inner, root_name, params, modules)
            step_callback = None
            if auto_step and not self._explicit_steps:
                step_callback = torch_hook(self.forward_pre_hook)
            self.torch_hooks.add_root(root, step_callback)
            for name, m in modules:
                self.module_maps[m] = name
            if self.non_finite is not None:
                self.non_finite.watch_root(root)
            self.module_maps[inner] = root_name
            if self.overrides.names:
                self._install_overrides(root)
            if self.prepared:
                self._sync_hooks()

    register_hook = register_module  # smdebug's alias (used by framework integrations)

    def register_loss(self, loss_module: nn.Module) -> None:
        """Save a loss module's output as ``<LossClass>_output_0`` (the ``losses`` collection)."""
        if not isinstance(loss_module, nn.Module):
            raise SMDebugTypeError(
                f"register_loss: loss_module={type(loss_module).__name__} must be a torch.nn.Module "
                "(usually a torch.nn.modules.loss._Loss)"
            )
        with self.failsafe("register_loss"):
            handles = self.torch_hooks.loss_handles
            if id(loss_module) in handles:
                return
            name = loss_module._get_name()
            self.module_maps[loss_module] = name
            if self.non_finite is not None:
                self.non_finite.watch_loss(loss_module, name)
            if self.overrides.forward:
                loss_module._module_name = name
                handles[id(loss_module)] = loss_module.register_forward_hook(
                    self._override_callback("forward_hook"))
                return
            handles[id(loss_module)] = self.torch_hooks.add_forward_hook(
                loss_module, self.capture.io_callback(name))

    def keep_forward_hooks(self) -> None:
        """Dynamo is about to trace: forward hooks stay attached from now on (`compile_watch`)."""
        self.torch_hooks.keep_forward_hooks()

    def _sync_hooks(self) -> None:
        """Attach forward hooks to the modules, and gradient hooks to the parameters, that some
        included collection can match (run when collections are prepared or change)."""
        self.steps.end_countdown()  # (the next step starts in full: it sees the new hooks)
        capture = self.capture
        saving = self.plans.saving_ids if capture.capturing else frozenset()
        self.torch_hooks.sync(capture.io_callback, capture.grad_hook, not self.overrides.forward,
                              not self.overrides.backward, saving)

    @property
    def handles(self) -> list[RemovableHandle]:
        """Every torch hook this hook has installed and not yet removed."""
        return self.torch_hooks.handles

    def remove(self) -> None:
        """Detach every torch hook; the model trains exactly as without smdebug afterwards."""
        self.torch_hooks.remove()
        if self.non_finite is not None:
            self.non_finite.remove()
        self.steps.halt()

    # -- steps -----------------------------------------------------------------------------------

    def forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        """A registered module's forward begins: the previous step ends and a new one starts."""
        if graph_task_id() != -1:  # `in_backward_pass()`, without a Python call on every step
            return  # (a checkpointed model computed again: not a step)
        if self.non_finite is not None:
            self.non_finite.boundary()
        steps = self.steps
        if steps.quiet_step():  # most steps: nothing to finish and nothing to save
            return
        root = self.torch_hooks.root_by_module.get(id(module))
        steps.begin((root,) if root is not None else (), None, "forward_pre_hook")

    def start_step(self, step: int | None = None, mode: ModeKeys | str | None = None) -> None:
        """Begin a step now, for loops whose steps are not one forward pass of a registered
        model (several forward passes, none, or a step boundary elsewhere, as in Lightning).

        The step before ends; `mode` becomes the mode if given (as `set_mode`); the new step is
        numbered `step` if given (greater than the current step; the steps skipped count as
        steps of the mode too), else the next one. At a saving step, the parameters of every
        registered module are saved now, as a forward pass would save its model's.

        From the first call on, the hook's steps are the ones begun here: forward passes of
        registered modules (registered before or after) begin no step, so a forward pass after
        `start_step` belongs to the step it began. Register a model with
        ``register_module(model, auto_step=False)`` if it is called before the first
        `start_step`. Raises SMDebugTypeError/SMDebugValueError naming a bad argument; does
        nothing once the hook is closed."""
        if step is not None or (mode is not None and mode.__class__ is not ModeKeys):
            step, mode = check_start_step(step, mode, self.step)
        if not self._explicit_steps:
            self._explicit_steps = True
            self.torch_hooks.stop_auto_steps()
            if self.non_finite is not None:
                self.non_finite.auto_steps_stopped()
        if self.non_finite is not None:
            self.non_finite.boundary()
        self.steps.start(step, mode, self.torch_hooks.roots, "start_step")

    # -- values saved outside modules ------------------------------------------------------------

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside modules (e.g. ``F.mse_loss``) as ``<name>_output_<i>``."""
        if not isinstance(tensor_value, torch.Tensor):
            raise SMDebugTypeError(f"tensor_value={type(tensor_value).__name__} must be a torch.Tensor")
        capture = self.capture
        if "_write_outputs" in self.overrides.names:  # (as smdebug: through the subclass's method)
            self._call_override("_write_outputs", tensor_name, tensor_value)
        elif capture.capturing:
            try:  # what `failsafe` does, without a context manager at every saving step
                capture.save_io(tensor_name, OUTPUT_SUFFIX, tensor_value)
            except Exception as e:
                with self.failsafe("record_tensor_value"):
                    raise e

    def save_scalar(self, name: str, value: Any, sm_metric: bool = False,
                    timestamp: float | None = None) -> None:
        """Save a scalar in the current step and mode (see `HookCore.save_scalar`).

        A float saved in a saving step (learning rates, metrics a callback saves there) is
        captured with the step's tensors, so that the step, scalars included, is recorded and
        replayed like any other: it stays on the steady saving cycle (`hooks.steady_cycle`)."""
        capture = self.capture
        if (capture.capturing and value.__class__ is float and timestamp is None and self.writes
                and not self.side_outputs.live and not self.disabled):
            try:
                capture.buffer.capture_value(capture.value_plan(SCALAR_PREFIX + name), value)
            except Exception as e:
                with self.failsafe("save_scalar"):
                    raise e
            return
        super().save_scalar(name, value, sm_metric, timestamp)

    def end_step(self) -> None:
        if self.non_finite is not None:
            self.non_finite.boundary()
        super().end_step()

    # -- the end -----------------------------------------------------------------------------------

    def _to_numpy(self, value: Any) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            return host_copy(value)
        return super()._to_numpy(value)

    def close(self) -> None:
        """Write the last step and the end marker, wait for uploads, and detach all torch hooks."""
        try:
            if self.non_finite is not None and not self.closed:
                self.non_finite.finish()
            super().close()
        finally:
            self.remove()


__all__ = ["GRADIENT_PREFIX", "CollectionKeys", "Hook"]
