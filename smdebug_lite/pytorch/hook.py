"""The PyTorch hook: smdebug's API and tensor names, on modern PyTorch mechanisms.

* A step starts at every forward pass of a registered module (a forward pre-hook), per mode;
  or, in loops whose steps are not forward passes, where the loop calls `Hook.start_step`
  (from its first call on, forward passes begin no step).
* Parameters are saved at the start of the step; gradients through
  ``Tensor.register_post_accumulate_grad_hook``, so frozen layers, shared parameters (one hook,
  saved once) and ``torch.compile``d models work, and no module backward hooks are needed.
  Gradient hooks are attached only while a step saves gradients: on other steps the backward
  pass runs no Python at all.
* A run's saving cycle, once it repeats, is carried out without the general path's decisions
  (`steady_cycle`): most saving steps, and the steps after them, cost a few checks and moves.
* Module inputs/outputs are captured only for modules whose tensor names an included collection
  can match: other modules get no hook at all.
* Everything the hook installs is a ``RemovableHandle``; ``remove()`` (and ``close()``) detach
  all of it. Every callback runs inside the core's ``failsafe``: an internal error is logged once
  and disables the hook; training goes on.
* A subclass may override smdebug's per-module methods (``forward_hook``, ``backward_hook``, ...,
  see `extension`): the hook then calls them as smdebug did, on every module at every step. That
  is decided at construction; a plain Hook never dispatches through them.
"""

from __future__ import annotations

import functools
import math
import operator
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from smdebug_lite.config.collection import CollectionKeys
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.hooks.arguments import check_start_step
from smdebug_lite.hooks.core import SCALAR_PREFIX, HookCore, TensorPlan
from smdebug_lite.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.pytorch import compile_watch, extension, sharded, step_call, workers
from smdebug_lite.pytorch.capture import StepBuffer, host_copy
from smdebug_lite.pytorch.collection import Collection, as_pytorch_collection
from smdebug_lite.pytorch.steady_cycle import SteadyCycle
from smdebug_lite.pytorch.step_record import StepRecord
from smdebug_lite.writer import PendingStep

logger = get_logger(__name__)
_FIRST = operator.itemgetter(0)

GRADIENT_PREFIX = "gradient/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"
# A module gets a forward hook when a collection matches one of its first few input/output names.
_IO_INDEX_PROBE = 16
# Runs a function once the current backward pass has finished (how DDP finishes its buckets).
# A private API: without it, gradients are copied in their hooks as they come.
_queue_callback = getattr(getattr(torch.autograd.Variable, "_execution_engine", None), "queue_callback", None)
# -1 outside a backward pass. A forward call inside one is activation checkpointing computing a
# checkpointed part again (`torch.utils.checkpoint`): not a new step, nor new inputs/outputs.
_graph_task_id = getattr(torch._C, "_current_graph_task_id", lambda: -1)


def in_backward_pass() -> bool:
    """Whether the autograd engine is running a backward pass on this thread (see `_graph_task_id`)."""
    return _graph_task_id() != -1



def _skip_in_compiled_code() -> bool:
    """torch.compile must run this package's hooks as they are (they count steps and copy
    tensors), never trace them into a graph. Putting the package on dynamo's skip list does
    that for every hook at once; wrapping each hook in ``torch.compiler.disable`` does it too,
    but costs about a microsecond per call, on every forward pass. True when the skip list took
    the package (a private torch API, so any failure falls back to the wrappers)."""
    try:
        from torch._dynamo import trace_rules

        trace_rules.add(__name__.split(".")[0])
        return True
    except Exception:
        return False


_skipped_by_compile: bool | None = None  # decided at the first registration (imports dynamo)


def _no_compile(fn):
    """`fn` as torch.compile must see it: skipped, never traced."""
    global _skipped_by_compile
    if _skipped_by_compile is None:
        _skipped_by_compile = _skip_in_compiled_code()
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return fn if _skipped_by_compile or disable is None else disable(fn)


class _Inert:
    """What a copy of a hooked model gets in place of this package's hooks: nothing to do."""

    __slots__ = ()

    def __call__(self, *args: Any) -> None:
        return None

    def __reduce__(self):
        return (_Inert, ())


class _HookCallback(functools.partial):
    """A torch hook of this package (a partial: calling it adds no Python frame).

    ``copy.deepcopy(model)`` and pickling a whole model (``torch.save(model)``) copy the
    modules' hook dicts. A copy is another model: its forward passes are no steps of this one,
    and this Hook (a writer, locks) cannot be copied anyway. So copies get an `_Inert` hook."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict) -> _Inert:
        return _Inert()

    def __reduce__(self):
        return (_Inert, ())


def _torch_hook(fn) -> _HookCallback:
    return _HookCallback(_no_compile(fn))


@dataclass(slots=True)
class _Root:
    """A registered module: what it is called and what it holds."""

    module: nn.Module  # the object called (a torch.compile wrapper stays the wrapper)
    inner: nn.Module  # where names come from
    name: str
    params: list[tuple[str, nn.Parameter]]
    modules: list[tuple[str, nn.Module]]
    handles: list[RemovableHandle] = field(default_factory=list)
    step_handle: RemovableHandle | None = None  # the forward pre-hook that begins steps, if any
    # (the hook's plan cache, [(plan, parameter)] of the parameters it saves): worked out again
    # only when the set of saving collections (hence the plan cache) changes.
    saved_params: tuple[dict, list] | None = None
    step_call: step_call.StepCall | None = None  # see `step_call`

    def params_to_save(self, hook: Hook) -> list[tuple[TensorPlan, nn.Parameter]]:
        cache = hook.plans.cache
        if self.saved_params is None or self.saved_params[0] is not cache:
            pairs = [(plan, p) for tname, p in self.params if (plan := hook.plan(tname)) is not None]
            self.saved_params = (cache, pairs)
        return self.saved_params[1]


def _unwrap_compiled(module: nn.Module) -> nn.Module:
    """torch.compile wraps a model in an OptimizedModule; names are the original model's."""
    inner = getattr(module, "_orig_mod", None)
    return inner if isinstance(inner, nn.Module) else module


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Tensors of a module's inputs/outputs in smdebug's order (tuples and lists, depth first)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors_in(v)


def _attach_grad_hook(p: torch.Tensor, slot: tuple[dict, int], callback, slots: dict, pid: int) -> None:
    """Put a gradient hook registered earlier back in its parameter's hook dict (see
    `_detach_grad_hook`). Another hook registered on the parameter meanwhile made a new dict:
    ours joins it, under the same key."""
    hooks, key = slot
    current = p._post_accumulate_grad_hooks
    if current is None:
        hooks[key] = callback
        p._post_accumulate_grad_hooks = hooks
    elif current is hooks:
        hooks[key] = callback
    else:
        current[key] = callback
        slots[pid] = (current, key)


def _detach_grad_hook(p: torch.Tensor, slot: tuple[dict, int]) -> None:
    """Take a gradient hook out of its parameter's hook dict. When that leaves the dict
    empty, the parameter is given none at all: torch calls into Python for a parameter with
    a hook dict, empty or not, at every backward pass."""
    hooks, key = slot
    hooks.pop(key, None)
    if not hooks and p._post_accumulate_grad_hooks is hooks:
        p._post_accumulate_grad_hooks = None


class Hook(HookCore):
    """``smdebug_lite.pytorch.Hook``: register a model (and losses); tensors are saved as the
    SaveConfig, collections and ReductionConfig say."""

    framework = "pytorch"

    def __init__(
        self,
        out_dir: str,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict | None = None,
        include_regex: str | Iterable[str] | None = None,
        include_collections: str | Iterable[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
    ) -> None:
        self._roots: list[_Root] = []
        self._root_by_module: dict[int, _Root] = {}
        self._loss_handles: dict[int, RemovableHandle] = {}
        self._io_handles: dict[int, RemovableHandle] = {}
        self._grad_handles: dict[int, RemovableHandle] = {}  # registered once per parameter
        self._grad_slots: dict[int, tuple[dict, int]] = {}  # (its hook dict, its key there)
        self._grad_attached: frozenset[int] = frozenset()  # whose callback is in its hook dict
        # Parameters whose gradients an included collection matches: (id, name, parameter,
        # callback), and which of them each set of saving collections wants hooked.
        self._grad_params: list[tuple[int, str, nn.Parameter, Any]] = []
        self._grad_wanted: dict[frozenset[int], frozenset[int]] = {}
        self._buffer = StepBuffer()
        self._io_counts: dict[str, int] = {}
        # module or loss name -> (inputs wanted, outputs wanted), filled as modules are called
        self._io_wants_by_name: dict[str, tuple[bool, bool]] = {}
        self._capturing = False
        self._grads_pending: list[tuple[str, torch.Tensor]] = []  # see `_make_grad_hook`
        # (hook dict, key there, callback) of every forward hook, and whether they are attached
        self._fwd_slots: list[tuple[dict, int, Any]] = []
        self._fwd_on = True
        self._fwd_kept = False  # attached at every step once dynamo compiles (`compile_watch`)
        self._sharded = False  # a registered model holds DTensors: every rank captures
        self._steady: SteadyCycle | None = None  # see `steady_cycle`
        # (saving, their ids, plan cache, gradient ids, record) of a step just handed over as a
        # repeat: what `_begin_step` makes a SteadyCycle of when the step after it is quiet
        self._repeated: tuple | None = None
        # smdebug's methods this subclass overrides (see `extension`): forward hooks on every
        # module dispatch to `forward_hook`, and parameters' gradients go through `backward_hook`.
        self._overrides = extension.overridden(type(self), Hook)
        self._ext_forward = not self._overrides.isdisjoint(
            ("forward_hook", "_write_inputs", "_write_outputs"))
        self._ext_backward = "backward_hook" in self._overrides
        self._ext_handles: list[RemovableHandle] = []
        self.module_maps: dict[nn.Module, str] = {}  # every registered module and loss -> its name
        self._raw_plans: dict[str, TensorPlan] = {}  # see `_write_raw_tensor_simple`
        self._scalar_plans: dict[str, TensorPlan] = {}  # see `save_scalar`
        self._explicit_steps = False  # `start_step` was called: forward passes begin no step
        super().__init__(
            out_dir,
            export_tensorboard=export_tensorboard,
            tensorboard_dir=tensorboard_dir,
            dry_run=dry_run,
            reduction_config=reduction_config,
            save_config=save_config,
            include_regex=include_regex,
            include_collections=include_collections,
            save_all=save_all,
            include_workers=include_workers,
        )
        self.collections_configured()

    @property
    def step_buffer(self) -> StepBuffer:
        """What the current step has captured, until it is handed to the writer."""
        return self._buffer

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
                name = self._module_name(module)
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

    def _module_name(self, module: nn.Module) -> str | None:
        for root in self._roots:
            for name, m in root.modules:
                if m is module or (m is root.module and module is root.inner):
                    return name
        return None

    def _wanted(self, name: str) -> bool:
        return any(c.matches(name) for c in self.plans.included)

    def _unmatched_hint(self, coll: Collection) -> str:
        if coll.name == CollectionKeys.LOSSES:  # (included by default)
            return ("no loss was saved: register the loss module with hook.register_loss(loss_fn), "
                    "or save a loss computed by a function with hook.record_tensor_value('loss', loss)")
        if any(coll.matches(name) for _, name, _, _ in self._grad_params):
            return ("no gradient reached a parameter's .grad in this step: gradients are saved as "
                    "backward() accumulates them there, not those torch.autograd.grad() returns")
        return super()._unmatched_hint(coll)

    def _io_wants(self, module_name: str) -> tuple[bool, bool]:
        """Whether an included collection can match (any of the first few of) the module's
        inputs, and its outputs."""
        return tuple(  # type: ignore[return-value]
            any(self._wanted(f"{module_name}{suffix}{i}") for i in range(_IO_INDEX_PROBE))
            for suffix in (INPUT_SUFFIX, OUTPUT_SUFFIX)
        )

    def _io_wanted(self, module_name: str) -> bool:
        return any(self._io_wants(module_name))

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
            inner = _unwrap_compiled(module)
            if id(module) in self._root_by_module or any(r.inner is inner for r in self._roots):
                logger.warning("register_module: %s is already registered; ignored", inner._get_name())
                return
            # (FSDP2's FSDP<Class> keeps <Class>'s names)
            root_name = sharded.unwrapped_class_name(inner) or inner._get_name()
            params = [(f"{root_name}_{n}", p) for n, p in inner.named_parameters()]
            if any(sharded.is_dtensor(p) for _, p in params):
                self._sharded = True
            modules = [(root_name, module) if n == "" else (n, m) for n, m in inner.named_modules()]
            root = _Root(module, inner, root_name, params, modules)
            if not compile_watch.watch(self):  # (before any compilation of `module`)
                self._fwd_kept = True
            if auto_step and not self._explicit_steps:
                callback = _torch_hook(self.forward_pre_hook)
                handle = root.step_handle = module.register_forward_pre_hook(callback)
                root.handles.append(handle)
                root.step_call = step_call.install(module, handle.id, callback)
            self._roots.append(root)
            self._root_by_module[id(module)] = root
            for name, m in modules:
                self.module_maps[m] = name
            self.module_maps[inner] = root_name
            if self._overrides:
                self._install_overrides(root)
            if self._prepared:
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
            if id(loss_module) in self._loss_handles:
                return
            name = loss_module._get_name()
            self.module_maps[loss_module] = name
            if self._ext_forward:
                loss_module._module_name = name
                self._loss_handles[id(loss_module)] = loss_module.register_forward_hook(
                    _torch_hook(functools.partial(self._call_override, "forward_hook")))
                return
            self._loss_handles[id(loss_module)] = self._add_forward_hook(loss_module, name)

    def _install_overrides(self, root: _Root) -> None:
        """Hook `root` as smdebug did, for the methods this subclass overrides: `forward_hook`
        on every module, `fhook` on the model, `backward_hook(name)` on every parameter that
        requires a gradient; `count_parameters` is called."""
        for name, m in root.modules:
            m._module_name = name  # (smdebug 1.0.34's way of naming a module to its hooks)
        root.inner._module_name = root.name
        overrides, add = self._overrides, self._ext_handles.append
        if self._ext_forward:
            callback = _torch_hook(functools.partial(self._call_override, "forward_hook"))
            for _, m in root.modules:
                add(m.register_forward_hook(callback))
        if "fhook" in overrides:
            fhook = _torch_hook(functools.partial(self._call_override, "fhook"))
            add(root.module.register_forward_hook(fhook))
        if self._ext_backward:
            for tname, p in root.params:
                if p.requires_grad:
                    callback = _HookCallback(self._call_grad_hook, self.backward_hook(tname))
                    add(p.register_hook(callback))
        if "count_parameters" in overrides:
            self.count_parameters(root.inner)

    def _add_forward_hook(self, module: nn.Module, name: str) -> RemovableHandle:
        callback = _torch_hook(functools.partial(self._forward_io_hook, name))
        handle = module.register_forward_hook(callback)
        slot = (handle.hooks_dict_ref(), handle.id, callback)
        self._fwd_slots.append(slot)
        if not compile_watch.watch(self):
            self._fwd_kept = True
        if not self._fwd_on and not self._fwd_kept:
            slot[0].pop(slot[1], None)
        return handle

    def keep_forward_hooks(self) -> None:
        """Dynamo is about to trace: from now on the forward hooks stay in their modules' hook
        dicts at every step, so that compiled code calls them (see `compile_watch`)."""
        self._fwd_kept = True
        for hooks, key, callback in self._fwd_slots:
            hooks[key] = callback

    def _set_forward_hooks(self, on: bool) -> None:
        """Forward hooks (losses, module inputs/outputs) are in their modules' hook dicts only
        while a step captures: on other steps those modules run torch's hook-free fast path.
        Registered once; attaching and detaching only move the callback in and out."""
        if on:
            for hooks, key, callback in self._fwd_slots:
                hooks[key] = callback
        elif not self._fwd_kept:
            for hooks, key, _ in self._fwd_slots:
                hooks.pop(key, None)
        self._fwd_on = on

    def _sync_hooks(self) -> None:
        """Attach forward hooks to the modules, and gradient hooks to the parameters, that some
        included collection can match (run when collections are prepared or change)."""
        self.cursor.quiet_left = 0  # (the next step starts in full: it sees the new hooks)
        self._io_wants_by_name.clear()  # what collections match may have changed
        for root in self._roots if not self._ext_forward else ():  # (else: `_install_overrides`)
            for name, m in root.modules:
                if id(m) not in self._io_handles and id(m) not in self._loss_handles and self._io_wanted(name):
                    self._io_handles[id(m)] = self._add_forward_hook(m, name)
        known = {entry[0] for entry in self._grad_params}
        for root in self._roots if not self._ext_backward else ():
            for tname, p in root.params:
                if p.requires_grad and id(p) not in known and self._wanted(GRADIENT_PREFIX + tname):
                    known.add(id(p))  # a shared parameter is saved once, under its first name
                    name = GRADIENT_PREFIX + tname
                    self._grad_params.append((id(p), name, p, self._make_grad_hook(name)))
        self._grad_wanted.clear()  # parameters or what collections match may have changed
        self._sync_grad_hooks()

    def _sync_grad_hooks(self) -> None:
        """Attach gradient hooks for the parameters this step saves a gradient of; detach the
        others. Steps that save no gradient thus pay nothing in the backward pass, and a run
        saving every step keeps its hooks attached.

        Each parameter's hook is registered once (its `RemovableHandle` is kept); after that,
        attaching and detaching only put the callback in and out of the parameter's hook dict,
        which costs far less than registering anew at every saved step."""
        saving = self.plans.saving_ids if self._capturing else frozenset()
        wanted = self._grad_wanted.get(saving)
        if wanted is None:
            matching = self.plans.matching
            wanted = self._grad_wanted[saving] = frozenset(
                pid for pid, grad_name, _, _ in self._grad_params
                if saving and any(id(c) in saving for c in matching(grad_name)))
        attached = self._grad_attached
        if wanted == attached:
            return
        handles, slots = self._grad_handles, self._grad_slots
        for pid, _, p, callback in self._grad_params:
            if pid in wanted:
                if pid not in attached:
                    slot = slots.get(pid)
                    if slot is None:
                        handle = handles[pid] = p.register_post_accumulate_grad_hook(callback)
                        slots[pid] = (handle.hooks_dict_ref(), handle.id)
                    else:
                        _attach_grad_hook(p, slot, callback, slots, pid)
            elif pid in attached:
                _detach_grad_hook(p, slots[pid])
        self._grad_attached = wanted

    @property
    def handles(self) -> list[RemovableHandle]:
        """Every torch hook this hook has installed and not yet removed."""
        out = [h for r in self._roots for h in r.handles]
        out += list(self._loss_handles.values()) + list(self._io_handles.values())
        return out + list(self._grad_handles.values()) + self._ext_handles

    def remove(self) -> None:
        """Detach every torch hook; the model trains exactly as without smdebug afterwards."""
        for pid, _, p, _ in self._grad_params:  # (a hook may have joined another dict)
            slot = self._grad_slots.get(pid)
            if slot is not None:
                _detach_grad_hook(p, slot)
        for h in self.handles:
            h.remove()
        for r in self._roots:
            r.handles.clear()
            r.step_handle = None
            if r.step_call is not None:
                step_call.uninstall(r.module, r.step_call)
                r.step_call = None
        self._loss_handles.clear()
        self._io_handles.clear()
        self._ext_handles.clear()
        self._fwd_slots.clear()
        self._grad_handles.clear()
        self._grad_slots.clear()
        self._grad_attached = frozenset()
        self._grad_params.clear()
        self._grad_wanted.clear()
        self._root_by_module.clear()
        compile_watch.unwatch(self)
        self._capturing = False
        self.cursor.quiet_left = 0
        self._steady = None

    # -- torch callbacks -------------------------------------------------------------------------

    def forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        """A registered module's forward begins: the previous step ends and a new one starts."""
        if _graph_task_id() != -1:  # `in_backward_pass()`, without a Python call on every step
            return  # (a checkpointed model computed again: not a step)
        cursor = self.cursor
        left = cursor.quiet_left
        if left and cursor.epoch == cursor.quiet_epoch:
            # Most steps: nothing to finish and nothing to save; only the counters move.
            cursor.quiet_left = left - 1
            cursor.advance()
            return
        root = self._root_by_module.get(id(module))
        self._step_begins((root,) if root is not None else (), None)

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
            step, mode = check_start_step(step, mode, self.cursor.step)
        if not self._explicit_steps:
            self._stop_auto_steps()
        cursor = self.cursor
        if mode is not None and mode is not cursor.mode:
            cursor.set_mode(mode)
        if step is None or step == cursor.step + 1:
            left = cursor.quiet_left
            if left and cursor.epoch == cursor.quiet_epoch:
                cursor.quiet_left = left - 1  # (as in `forward_pre_hook`)
                cursor.advance()
                return
            self._step_begins(self._roots, None)
        else:
            cursor.quiet_left = 0
            self._steady = None
            self._step_begins(self._roots, step)

    def _stop_auto_steps(self) -> None:
        """From now on only `start_step` begins steps: the step pre-hooks are taken off."""
        self._explicit_steps = True
        for root in self._roots:
            handle, root.step_handle = root.step_handle, None
            if handle is not None:
                handle.remove()
                root.handles.remove(handle)
            if root.step_call is not None:
                step_call.uninstall(root.module, root.step_call)
                root.step_call = None

    def _step_begins(self, roots: tuple[_Root, ...] | list[_Root], step: int | None) -> None:
        """A step that is not one of the counted-down quiet steps begins (numbered `step`, if
        given): `roots` are the models whose parameters a saving step saves now."""
        if (self.disabled and not self._sharded) or self._closed:
            # (a disabled hook of a sharded model goes on making the collectives of saving
            # steps, and discards what it captures: the other ranks wait for them)
            return
        try:  # what `failsafe` does, without a context manager on every forward pass
            cycle = self._steady
            if cycle is not None:  # (see `steady_cycle`)
                if self._capturing:
                    done = self._steady_end(cycle)  # the saving step ends
                else:
                    done = self._steady_begin(cycle, roots)  # the saving step begins
                if done:
                    return
                self._steady = None
            self._begin_step(step)
            if self._capturing:
                raw = self.side_outputs.raw_wanted
                for root in roots:
                    self._buffer.capture_many(root.params_to_save(self), raw)
        except Exception as e:
            with self.failsafe("start_step" if self._explicit_steps else "forward_pre_hook"):
                raise e

    def _forward_io_hook(self, name: str, module: nn.Module, inputs: Any, outputs: Any) -> None:
        if not self._capturing or in_backward_pass():  # (a checkpointed part computed again)
            return
        try:  # what `failsafe` does, without a context manager on every call
            wants = self._io_wants_by_name.get(name)
            if wants is None:
                wants = self._io_wants_by_name[name] = self._io_wants(name)
            if wants[0]:
                self._save_io(name, INPUT_SUFFIX, inputs)
            if wants[1]:
                self._save_io(name, OUTPUT_SUFFIX, outputs)
        except Exception as e:
            with self.failsafe("forward_hook"):
                raise e

    def _make_grad_hook(self, grad_name: str):
        def on_grad_accumulated(param: torch.Tensor) -> None:
            if not self._capturing:
                return
            pending = self._grads_pending
            pending.append((grad_name, param))
            if len(pending) == 1:
                # The gradients of this backward pass are copied together once it has finished
                # (before user code can clip or zero them): one tight loop instead of Python
                # work between the pass's kernels.
                try:
                    _queue_callback(self._capture_pending_grads)
                except Exception:  # (no such API in this torch, or not inside a backward pass)
                    self._capture_pending_grads()

        return on_grad_accumulated

    def _capture_pending_grads(self) -> None:
        """Snapshot the gradients accumulated by the backward pass that just ended. Several
        backward passes in one step: the accumulated gradient wins (`replace`)."""
        pending, self._grads_pending = self._grads_pending, []
        if not self._capturing:
            return
        try:  # what `failsafe` does, without a context manager in every backward pass
            names = tuple(map(_FIRST, pending))
            if self._buffer.replay_grads(names, [param.grad for _, param in pending]):
                return
            plan = self.plan
            grads = [(p, g) for name, param in pending
                     if (g := param.grad) is not None and (p := plan(name)) is not None]
            self._buffer.capture_many(grads, self.side_outputs.raw_wanted, replace=True,
                                      names=names if len(grads) == len(names) else ())
        except Exception as e:
            with self.failsafe("gradient hook"):
                raise e

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside modules (e.g. ``F.mse_loss``) as ``<name>_output_<i>``."""
        if not isinstance(tensor_value, torch.Tensor):
            raise SMDebugTypeError(f"tensor_value={type(tensor_value).__name__} must be a torch.Tensor")
        if "_write_outputs" in self._overrides:  # (as smdebug: through the subclass's method)
            self._call_override("_write_outputs", tensor_name, tensor_value)
        elif self._capturing:
            try:  # what `failsafe` does, without a context manager at every saving step
                self._save_io(tensor_name, OUTPUT_SUFFIX, tensor_value)
            except Exception as e:
                with self.failsafe("record_tensor_value"):
                    raise e

    def save_scalar(self, name: str, value: Any, sm_metric: bool = False,
                    timestamp: float | None = None) -> None:
        """Save a scalar in the current step and mode (see `HookCore.save_scalar`).

        A float saved in a saving step (learning rates, metrics a callback saves there) is
        captured with the step's tensors, so that the step, scalars included, is recorded and
        replayed like any other: it stays on the steady saving cycle (`steady_cycle`)."""
        if (self._capturing and value.__class__ is float and timestamp is None and self.writes
                and not self.side_outputs.live and not self.disabled):
            try:
                plan = self._scalar_plans.get(name)
                if plan is None:
                    plan = self._scalar_plans[name] = TensorPlan(SCALAR_PREFIX + name, save_raw=True)
                self._buffer.capture_value(plan, value)
            except Exception as e:
                with self.failsafe("save_scalar"):
                    raise e
            return
        super().save_scalar(name, value, sm_metric, timestamp)

    # -- extension points: smdebug's per-module methods (see `extension`) ----------------------

    def _call_override(self, method: str, *args: Any) -> Any:
        """Run a method a subclass overrides, from a torch hook, under the failsafe. What it
        returns goes back to torch (a forward hook's result replaces the module's output)."""
        if self.disabled or self._closed:
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
        if self.disabled or self._closed:
            return None
        try:
            return fn(grad)
        except Exception as e:
            with self.failsafe("backward_hook"):
                raise e
        return None

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        """smdebug's forward hook of every module: save the module's inputs and outputs that the
        included collections select, through `_write_inputs` / `_write_outputs`.

        Called on every module of a registered model (and every registered loss) at every step
        only when a subclass overrides it or one of those two; a plain Hook hooks just the
        modules some collection selects, and only in saving steps."""
        if not self._capturing:
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
        return _HookCallback(self._save_gradient, GRADIENT_PREFIX + tname)

    def count_parameters(self, model: nn.Module) -> int:
        """The number of trainable parameter values of `model`; a subclass's override is
        called at `register_module`, as in smdebug."""
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    def _write_inputs(self, name: str, inputs: Any) -> None:
        """Save the tensors of `inputs` (tuples and lists flattened) as ``<name>_input_<i>``,
        where a collection selects them, in a saving step; `i` goes on counting over the calls
        of the step, as for a module called twice."""
        if self._capturing and _graph_task_id() == -1:  # (not a checkpointed part computed again)
            try:
                self._save_io(name, INPUT_SUFFIX, inputs)
            except Exception as e:
                with self.failsafe("_write_inputs"):
                    raise e

    def _write_outputs(self, name: str, outputs: Any) -> None:
        """`_write_inputs` for ``<name>_output_<i>``."""
        if self._capturing and _graph_task_id() == -1:
            try:
                self._save_io(name, OUTPUT_SUFFIX, outputs)
            except Exception as e:
                with self.failsafe("_write_outputs"):
                    raise e

    def _save_for_tensor(self, tensor_name: str, tensor_value: Any,
                         check_before_write: bool = True) -> None:
        """Save a value under `tensor_name` as the included collections that select it say, in
        a saving step. `check_before_write=False`: by every such collection, whether or not its
        schedule saves this step (as smdebug). A later save of the name in the step replaces it."""
        if not self._capturing:
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
                self._buffer.capture(plan, tensor_value, want_raw, replace=True)
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
        if not self._capturing:
            return
        try:
            if isinstance(tensor_value, torch.Tensor) and timestamp is None:
                if tensor_value.numel():
                    plan = self._raw_plans.get(tensor_name)
                    if plan is None:
                        plan = self._raw_plans[tensor_name] = TensorPlan(tensor_name, save_raw=True)
                    self._buffer.capture(plan, tensor_value, True, replace=True)
                return
            arr = self._to_numpy(tensor_value)
            sw = self._pending_step
            if arr.size and sw is not None:
                sw.add_tensor(tensor_name, arr, timestamp)
        except Exception as e:
            with self.failsafe("_write_raw_tensor_simple"):
                raise e

    def _save_gradient(self, name: str, grad: torch.Tensor | None) -> None:
        """What `backward_hook`'s callback does."""
        if not self._capturing or grad is None:
            return
        try:
            plan = self.plan(name)
            if plan is not None:
                want_raw = plan.save_raw or self.side_outputs.wants_raw(plan)
                self._buffer.capture(plan, grad, want_raw, replace=True)
        except Exception as e:
            with self.failsafe("backward_hook"):
                raise e

    # -- capture ---------------------------------------------------------------------------------

    def _save_io(self, name: str, suffix: str, value: Any) -> None:
        key = name + suffix
        idx = self._io_counts.get(key, 0)
        for t in (value,) if isinstance(value, torch.Tensor) else _tensors_in(value):
            plan = self.plan(f"{key}{idx}")
            idx += 1
            if plan is not None:
                self._buffer.capture(plan, t, plan.save_raw or self.side_outputs.wants_raw(plan))
        self._io_counts[key] = idx

    def _flush_buffer(self) -> None:
        buf, sw, writer = self._buffer, self._pending_step, self.trial_writer
        rec = buf.replayed()
        if rec is not None:
            if sw is not None and not len(sw) and rec.repeatable_by(writer):
                # The step is the record's again: the writer process is told only its numbers.
                buf.end_replay()
                plans = self.plans
                self._repeated = (plans.saving, plans.saving_ids, plans.cache,
                                  self._grad_attached, rec)
                rec.repeat_as(sw)
                sw.on_submitted = functools.partial(self._record_used, rec, sw)
                return
            buf.abort_replay()
        rec = None
        if len(buf):
            items = buf.drain()
            self.write_step(items, time.time())  # one time for the step's tensors
            if (sw is not None and len(sw) == len(items) and self.writes
                    and not self.side_outputs.live):
                rec = buf.take_record(items)
        taken = buf.take_buffers()
        if taken:
            # Later snapshots go straight to the writer process's shared memory, if it has one.
            buf.buffers.writer_process = getattr(self.trial_writer, "proc", None)
            if sw is not None and self.writes and len(sw):  # (writes is False in a dry run)
                if rec is not None:  # the next saving step like this one may replay it
                    rec.plan_cache = self.plans.cache
                    sw.on_written = rec.written
                    sw.on_submitted = functools.partial(self._adopt_record, rec, sw)
                else:  # snapshot memory is reused once the writer has written the step
                    sw.on_written = functools.partial(buf.buffers.give_back, taken)
            # Otherwise nothing refers to the snapshots any more; they are freed.

    @staticmethod
    def _record_used(rec: StepRecord, sw, template: object) -> None:
        rec.used_by(sw.token)

    def _adopt_record(self, rec: StepRecord, sw, template: object) -> None:
        """The recorded step was submitted: with a writer's template to repeat, it becomes the
        record that later saving steps replay."""
        rec.used_by(sw.token)
        writer = self.trial_writer
        proc = getattr(writer, "proc", None)
        if template is None or proc is None:
            rec.drop()
            return
        rec.template, rec.writer, rec.board = template, writer, proc.board
        old, self._buffer.record = self._buffer.record, rec
        if old is not None:
            old.drop()

    def _start_replay(self, rec: StepRecord) -> None:
        """Replay the record in this saving step if nothing it relies on has changed."""
        sw = self._pending_step
        if (sw is not None and not len(sw) and rec.plan_cache is self.plans.cache
                and not self.side_outputs.raw_wanted and rec.repeatable_by(self.trial_writer)
                and rec.ready()):
            self._buffer.begin_replay(rec)

    # -- steps -----------------------------------------------------------------------------------

    def _begin_step(self, step: int | None = None) -> None:
        """What every step's start does outside the steady cycle and the quiet countdown."""
        if self._io_counts:
            self._io_counts.clear()
        if self._grads_pending:  # a backward pass that failed never ran its end callback
            self._grads_pending = []
        self._repeated = None
        self._next_step(step)  # (ends the step before: `_flush_buffer` may set `_repeated`)
        repeated, self._repeated = self._repeated, None
        # (a sharded model's ranks all capture: its reductions and gathers are collectives)
        self._capturing = (bool(self.plans.saving) and (self.writes or self.dry_run or self._sharded)
                           and (not self.disabled or self._sharded))
        if self._capturing and self._buffer.record is not None:
            self._start_replay(self._buffer.record)
        if self._grad_params and (self._capturing or self._grad_attached):
            self._sync_grad_hooks()
        if self._capturing != self._fwd_on:
            self._set_forward_hooks(self._capturing)
        if not (self._capturing or self._grad_attached or self._fwd_on):
            self.quiet_steps_ahead()
            if repeated is not None:
                self._steady = self._take_steady(*repeated)

    # -- the steady saving cycle (see `steady_cycle`) --------------------------------------------

    def _take_steady(self, saving: list, ids: frozenset[int], plan_cache: dict,
                     grad_ids: frozenset[int], rec: StepRecord) -> SteadyCycle | None:
        """The cycle just completed, as a `SteadyCycle`, if the next one can be carried out
        without the general path: one model, one schedule that all included collections save
        by, nothing else written at a saving step (TensorBoard, SageMaker metrics, training
        state), every saving collection's names settled."""
        cursor, plans = self.cursor, self.plans
        mode = cursor.mode
        if (len(self._roots) != 1 or self.side_outputs.live or self.training_state is not None
                or not self.writes or self._buffer.record is not rec
                or self._pending_step is not None or plans.saving or self.has_deferred_saves
                or not self.names_settled(ids) or self._grad_wanted.get(ids) is not grad_ids
                or plans.cache_for(ids) is not plan_cache):
            return None
        window = cursor.window(mode)
        schedules, members = cursor.schedule(mode, plans.included)
        # (this step lies in the quiet window the saving step opened, which ends at a saving step)
        if (window is None or window[2] == math.inf or len(schedules) != 1
                or len(members) != len(saving) or any(c is not s for (c, _), s in zip(members, saving, strict=True))):
            return None
        root = self._roots[0]
        if root.saved_params is None or root.saved_params[0] is not plan_cache:
            return None
        grads = [(pid, p, callback) for pid, _, p, callback in self._grad_params if pid in grad_ids]
        return SteadyCycle(cursor.epoch, mode, schedules[0], saving, ids, plan_cache,
                           plans.saving_ids, plans.cache, rec, root, root.saved_params[1], grads,
                           grad_ids, int(window[2]))

    def _steady_begin(self, cycle: SteadyCycle, roots: tuple[_Root, ...] | list[_Root]) -> bool:
        """Start the cycle's next saving step, as `_begin_step` would, if nothing the cycle
        relies on has changed (`roots`: whose parameters the step saves); False: the general
        path starts it."""
        cursor, plans = self.cursor, self.plans
        mode = cursor.mode
        mode_step = cursor.mode_steps.get(mode, -1) + 1
        rec = cycle.record
        buf = self._buffer
        # (the schedule is the one the cycle was decided under: the step due is a saving step)
        if (mode_step != cycle.due or mode is not cycle.mode or cursor.epoch != cycle.generation
                or self._pending_step is not None or plans.saving or self.has_deferred_saves
                or self._grad_attached or self._fwd_on or self._grads_pending
                or plans.cache_for(cycle.saving_ids) is not cycle.plan_cache
                or self._grad_wanted.get(cycle.saving_ids) is not cycle.grad_ids
                or len(roots) != 1 or roots[0] is not cycle.root
                or buf.record is not rec or not rec.repeatable_by(self.trial_writer) or not rec.ready()):
            return False
        following = cycle.schedule.next_save_step(mode_step + 1)
        if not buf.begin_replay(rec):
            return False
        step = cursor.advance()
        plans.restore(cycle.saving, cycle.saving_ids, cycle.plan_cache)
        cursor.open_window(mode, mode_step, math.inf if following is None else following)
        self._pending_step = PendingStep(step, self.worker, mode, mode_step)
        self._capturing = True
        slots = self._grad_slots
        for pid, p, callback in cycle.grads:
            _attach_grad_hook(p, slots[pid], callback, slots, pid)
        self._grad_attached = cycle.grad_ids
        self._set_forward_hooks(True)
        buf.capture_many(cycle.params, False)
        return True

    def _steady_end(self, cycle: SteadyCycle) -> bool:
        """End the cycle's saving step and start the quiet step after it, as `_begin_step`
        would, if the step replayed its record and nothing else; False: the general path."""
        buf = self._buffer
        rec = cycle.record
        sw = self._pending_step
        cursor, plans = self.cursor, self.plans
        mode = cursor.mode
        writer = self.trial_writer
        if (sw is None or len(sw) or sw.step != cursor.step or buf.replayed() is not rec
                or mode is not cycle.mode or cursor.epoch != cycle.generation
                or plans.saving is not cycle.saving or self.has_deferred_saves or self._grads_pending
                or plans.cache_for(cycle.quiet_ids) is not cycle.quiet_plan_cache
                or not rec.repeatable_by(writer)):
            return False
        mode_step = cursor.mode_steps[mode] + 1
        window = cursor.window(mode)
        if window is None or not window[1] < mode_step < window[2]:
            return False
        # The saving step is handed over as a repeat of the record (see `_flush_buffer`).
        self._capturing = False
        buf.end_replay()
        self._io_counts.clear()
        self._pending_step = None
        rec.repeat_as(sw)
        writer.submit(sw)
        rec.used_by(sw.token)
        self.last_saved_step = sw.step
        self.maybe_export_collections()
        # The step after it saves nothing (see `HookCore._begin`).
        cursor.advance()
        plans.restore([], cycle.quiet_ids, cycle.quiet_plan_cache)
        slots = self._grad_slots
        for pid, p, _ in cycle.grads:
            _detach_grad_hook(p, slots[pid])
        self._grad_attached = frozenset()
        self._set_forward_hooks(False)
        self.quiet_steps_ahead()
        if window[2] == math.inf:  # no collection saves again: no more cycles
            self._steady = None
        else:
            cycle.due = int(window[2])
        return True

    def end_step(self) -> None:
        """Write what the step captured (one host transfer for its reductions), then submit it."""
        self._capturing = False
        if len(self._buffer):
            if self.disabled:
                self._buffer.drain()
                self._buffer.take_buffers()
            else:
                try:  # what `failsafe` does, without a context manager on every saved step
                    self._flush_buffer()
                except Exception as e:
                    with self.failsafe("end_step"):
                        raise e
        super().end_step()

    def disable(self, where: str, error: BaseException) -> None:
        self._capturing = False
        self._steady = None
        super().disable(where, error)
        if self._sharded:  # plans as before (see `forward_pre_hook`); nothing is written
            self.plan = self._plan_while_disabled

    def _plan_while_disabled(self, name: str) -> TensorPlan | None:
        return self.plans.plan(name) if self.plans.saving else None

    def _to_numpy(self, value: Any) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            return host_copy(value)
        return super()._to_numpy(value)

    def close(self) -> None:
        """Write the last step and the end marker, wait for uploads, and detach all torch hooks."""
        try:
            super().close()
        finally:
            self.remove()


__all__ = ["GRADIENT_PREFIX", "CollectionKeys", "Hook"]
