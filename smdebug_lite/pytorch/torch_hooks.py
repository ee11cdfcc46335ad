"""Every torch hook the PyTorch hook installs, and how they are moved in and out of use.

* A registered model (`Root`) gets the forward pre-hook that begins steps (and a `step_call`
  that runs it without torch's hook path).
* Losses and modules whose inputs/outputs an included collection can match get a forward hook;
  parameters whose gradients one can match get a post-accumulate-grad hook. Each is registered
  once, then only moved in and out of its tensor's or module's hook dict: attached for steps
  that capture, detached otherwise, so those modules and parameters run torch's hook-free path
  (once dynamo compiles anything, forward hooks stay attached: `compile_watch`).
* Everything is a ``RemovableHandle``; `remove` detaches all of it.

What the callbacks do with the tensors is `step_capture`'s; when they are attached is decided
by the step machine (`hooks.step_machine`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from smdebug_lite.pytorch import compile_watch, step_call

if TYPE_CHECKING:
    from smdebug_lite.hooks.capture_plan import TensorPlan
    from smdebug_lite.hooks.core import HookCore

GRADIENT_PREFIX = "gradient/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"
# A module gets a forward hook when a collection matches one of its first few input/output names.
_IO_INDEX_PROBE = 16
# -1 outside a backward pass. A forward call inside one is activation checkpointing computing a
# checkpointed part again (`torch.utils.checkpoint`): not a new step, nor new inputs/outputs.
graph_task_id = getattr(torch._C, "_current_graph_task_id", lambda: -1)


def in_backward_pass() -> bool:
    """Whether the autograd engine is running a backward pass on this thread (see `graph_task_id`)."""
    return graph_task_id() != -1


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


class Inert:
    """What a copy of a hooked model gets in place of this package's hooks: nothing to do."""

    __slots__ = ()

    def __call__(self, *args: Any) -> None:
        return None

    def __reduce__(self):
        return (Inert, ())


class HookCallback(functools.partial):
    """A torch hook of this package (a partial: calling it adds no Python frame).

    ``copy.deepcopy(model)`` and pickling a whole model (``torch.save(model)``) copy the
    modules' hook dicts. A copy is another model: its forward passes are no steps of this one,
    and a Hook (a writer, locks) cannot be copied anyway. So copies get an `Inert` hook."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict) -> Inert:
        return Inert()

    def __reduce__(self):
        return (Inert, ())


def torch_hook(fn) -> HookCallback:
    return HookCallback(_no_compile(fn))


@dataclass(slots=True)
class Root:
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

    def params_to_save(self, hook: HookCore) -> list[tuple[TensorPlan, nn.Parameter]]:
        cache = hook.plans.cache
        if self.saved_params is None or self.saved_params[0] is not cache:
            pairs = [(plan, p) for tname, p in self.params if (plan := hook.plan(tname)) is not None]
            self.saved_params = (cache, pairs)
        return self.saved_params[1]


def unwrap_compiled(module: nn.Module) -> nn.Module:
    """torch.compile wraps a model in an OptimizedModule; names are the original model's."""
    inner = getattr(module, "_orig_mod", None)
    return inner if isinstance(inner, nn.Module) else module


def attach_grad_hook(p: torch.Tensor, slot: tuple[dict, int], callback, slots: dict, pid: int) -> None:
    """Put a gradient hook registered earlier back in its parameter's hook dict (see
    `detach_grad_hook`). Another hook registered on the parameter meanwhile made a new dict:
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


def detach_grad_hook(p: torch.Tensor, slot: tuple[dict, int]) -> None:
    """Take a gradient hook out of its parameter's hook dict. When that leaves the dict
    empty, the parameter is given none at all: torch calls into Python for a parameter with
    a hook dict, empty or not, at every backward pass."""
    hooks, key = slot
    hooks.pop(key, None)
    if not hooks and p._post_accumulate_grad_hooks is hooks:
        p._post_accumulate_grad_hooks = None


class TorchHooks:
    """The torch hooks of one PyTorch hook (see the module docstring): which modules and
    parameters get hooks follows what the hook's included collections can match."""

    def __init__(self, hook: HookCore) -> None:
        self.hook = hook
        self.roots: list[Root] = []
        self.root_by_module: dict[int, Root] = {}
        self.loss_handles: dict[int, RemovableHandle] = {}
        self.io_handles: dict[int, RemovableHandle] = {}
        self.grad_handles: dict[int, RemovableHandle] = {}  # registered once per parameter
        self.grad_slots: dict[int, tuple[dict, int]] = {}  # (its hook dict, its key there)
        self.grad_attached: frozenset[int] = frozenset()  # whose callback is in its hook dict
        # Parameters whose gradients an included collection matches: (id, name, parameter,
        # callback), and which of them each set of saving collections wants hooked.
        self.grad_params: list[tuple[int, str, nn.Parameter, Any]] = []
        self.grad_wanted: dict[frozenset[int], frozenset[int]] = {}
        # (hook dict, key there, callback) of every forward hook, and whether they are attached
        self.fwd_slots: list[tuple[dict, int, Any]] = []
        self.fwd_on = True
        self.fwd_kept = False  # attached at every step once dynamo compiles (`compile_watch`)
        self.ext_handles: list[RemovableHandle] = []  # hooks of a subclass's overrides
        # module or loss name -> (inputs wanted, outputs wanted), filled as modules are called
        self.io_wants_by_name: dict[str, tuple[bool, bool]] = {}

    # -- what the included collections can match -----------------------------------------------

    def wanted(self, name: str) -> bool:
        return any(c.matches(name) for c in self.hook.plans.included)

    def io_wants(self, module_name: str) -> tuple[bool, bool]:
        """Whether an included collection can match (any of the first few of) the module's
        inputs, and its outputs."""
        return tuple(  # type: ignore[return-value]
            any(self.wanted(f"{module_name}{suffix}{i}") for i in range(_IO_INDEX_PROBE))
            for suffix in (INPUT_SUFFIX, OUTPUT_SUFFIX)
        )

    def module_name(self, module: nn.Module) -> str | None:
        for root in self.roots:
            for name, m in root.modules:
                if m is module or (m is root.module and module is root.inner):
                    return name
        return None

    # -- registration ----------------------------------------------------------------------------

    def registered(self, module: nn.Module, inner: nn.Module) -> bool:
        return id(module) in self.root_by_module or any(r.inner is inner for r in self.roots)

    def add_root(self, root: Root, step_callback: HookCallback | None) -> None:
        """Register a model; with `step_callback`, its forward passes begin steps."""
        if not compile_watch.watch(self):  # (before any compilation of the model)
            self.fwd_kept = True
        if step_callback is not None:
            module = root.module
            handle = root.step_handle = module.register_forward_pre_hook(step_callback)
            root.handles.append(handle)
            root.step_call = step_call.install(module, handle.id, step_callback)
        self.roots.append(root)
        self.root_by_module[id(root.module)] = root

    def stop_auto_steps(self) -> None:
        """Forward passes begin no step any more: the step pre-hooks are taken off."""
        for root in self.roots:
            handle, root.step_handle = root.step_handle, None
            if handle is not None:
                handle.remove()
                root.handles.remove(handle)
            if root.step_call is not None:
                step_call.uninstall(root.module, root.step_call)
                root.step_call = None

    def add_forward_hook(self, module: nn.Module, callback: HookCallback) -> RemovableHandle:
        """A forward hook moved in and out of use (see `set_forward_hooks`)."""
        handle = module.register_forward_hook(callback)
        slot = (handle.hooks_dict_ref(), handle.id, callback)
        self.fwd_slots.append(slot)
        if not compile_watch.watch(self):
            self.fwd_kept = True
        if not self.fwd_on and not self.fwd_kept:
            slot[0].pop(slot[1], None)
        return handle

    def keep_forward_hooks(self) -> None:
        """Dynamo is about to trace: from now on the forward hooks stay in their modules' hook
        dicts at every step, so that compiled code calls them (see `compile_watch`)."""
        self.fwd_kept = True
        for hooks, key, callback in self.fwd_slots:
            hooks[key] = callback

    def set_forward_hooks(self, on: bool) -> None:
        """Forward hooks (losses, module inputs/outputs) are in their modules' hook dicts only
        while a step captures: on other steps those modules run torch's hook-free fast path.
        Registered once; attaching and detaching only move the callback in and out."""
        if on:
            for hooks, key, callback in self.fwd_slots:
                hooks[key] = callback
        elif not self.fwd_kept:
            for hooks, key, _ in self.fwd_slots:
                hooks.pop(key, None)
        self.fwd_on = on

    def sync(self, io_callback: Callable[[str], HookCallback], grad_callback: Callable[[str], Any],
             modules: bool, params: bool, saving_ids: frozenset[int]) -> None:
        """Give forward hooks to the modules (`modules`), and gradient hooks to the parameters
        (`params`), that some included collection can match; then attach the gradient hooks
        `saving_ids` wants (run when collections are prepared or change)."""
        self.io_wants_by_name.clear()  # what collections match may have changed
        for root in self.roots if modules else ():
            for name, m in root.modules:
                if (id(m) not in self.io_handles and id(m) not in self.loss_handles
                        and any(self.io_wants(name))):
                    self.io_handles[id(m)] = self.add_forward_hook(m, io_callback(name))
        known = {entry[0] for entry in self.grad_params}
        for root in self.roots if params else ():
            for tname, p in root.params:
                if p.requires_grad and id(p) not in known and self.wanted(GRADIENT_PREFIX + tname):
                    known.add(id(p))  # a shared parameter is saved once, under its first name
                    name = GRADIENT_PREFIX + tname
                    self.grad_params.append((id(p), name, p, grad_callback(name)))
        self.grad_wanted.clear()  # parameters or what collections match may have changed
        self.sync_grad_hooks(saving_ids)

    def sync_grad_hooks(self, saving: frozenset[int]) -> None:
        """Attach gradient hooks for the parameters the saving collections (ids `saving`) save
        a gradient of; detach the others. Steps that save no gradient thus pay nothing in the
        backward pass, and a run saving every step keeps its hooks attached.

        Each parameter's hook is registered once (its `RemovableHandle` is kept); after that,
        attaching and detaching only put the callback in and out of the parameter's hook dict,
        which costs far less than registering anew at every saved step."""
        wanted = self.grad_wanted.get(saving)
        if wanted is None:
            matching = self.hook.plans.matching
            wanted = self.grad_wanted[saving] = frozenset(
                pid for pid, grad_name, _, _ in self.grad_params
                if saving and any(id(c) in saving for c in matching(grad_name)))
        attached = self.grad_attached
        if wanted == attached:
            return
        handles, slots = self.grad_handles, self.grad_slots
        for pid, _, p, callback in self.grad_params:
            if pid in wanted:
                if pid not in attached:
                    slot = slots.get(pid)
                    if slot is None:
                        handle = handles[pid] = p.register_post_accumulate_grad_hook(callback)
                        slots[pid] = (handle.hooks_dict_ref(), handle.id)
                    else:
                        attach_grad_hook(p, slot, callback, slots, pid)
            elif pid in attached:
                detach_grad_hook(p, slots[pid])
        self.grad_attached = wanted

    # -- the steady cycle's moves (see `step_capture`) ---------------------------------------------

    def attach_grads(self, grads: list[tuple[int, Any, Any]], grad_ids: frozenset[int]) -> None:
        slots = self.grad_slots
        for pid, p, callback in grads:
            attach_grad_hook(p, slots[pid], callback, slots, pid)
        self.grad_attached = grad_ids

    def detach_grads(self, grads: list[tuple[int, Any, Any]]) -> None:
        slots = self.grad_slots
        for pid, p, _ in grads:
            detach_grad_hook(p, slots[pid])
        self.grad_attached = frozenset()

    # -- removal ---------------------------------------------------------------------------------

    @property
    def handles(self) -> list[RemovableHandle]:
        """Every torch hook installed and not yet removed."""
        out = [h for r in self.roots for h in r.handles]
        out += list(self.loss_handles.values()) + list(self.io_handles.values())
        return out + list(self.grad_handles.values()) + self.ext_handles

    def remove(self) -> None:
        """Detach every torch hook; the model trains exactly as without smdebug afterwards."""
        for pid, _, p, _ in self.grad_params:  # (a hook may have joined another dict)
            slot = self.grad_slots.get(pid)
            if slot is not None:
                detach_grad_hook(p, slot)
        for h in self.handles:
            h.remove()
        for r in self.roots:
            r.handles.clear()
            r.step_handle = None
            if r.step_call is not None:
                step_call.uninstall(r.module, r.step_call)
                r.step_call = None
        self.loss_handles.clear()
        self.io_handles.clear()
        self.ext_handles.clear()
        self.fwd_slots.clear()
        self.grad_handles.clear()
        self.grad_slots.clear()
        self.grad_attached = frozenset()
        self.grad_params.clear()
        self.grad_wanted.clear()
        self.root_by_module.clear()
        compile_watch.unwatch(self)


__all__ = [
    "GRADIENT_PREFIX",
    "INPUT_SUFFIX",
    "OUTPUT_SUFFIX",
    "HookCallback",
    "Inert",
    "Root",
    "TorchHooks",
    "attach_grad_hook",
    "detach_grad_hook",
    "graph_task_id",
    "in_backward_pass",
    "torch_hook",
    "unwrap_compiled",
]
