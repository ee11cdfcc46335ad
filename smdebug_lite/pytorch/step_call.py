"""Counting a registered module's forward passes without torch's hook path on every step.

A module with any forward pre-hook is called through the general part of ``Module._call_impl``
(a closure, a set, hook lists built and walked), which on the training thread costs several
times the hook itself, at every step. The hook's step counter is a forward pre-hook, and it
stays registered; `StepCall`, installed as the module's ``_compiled_call_impl`` (what
``Module.__call__`` calls first when set), runs that pre-hook itself and then ``forward``,
exactly as ``_call_impl`` would, whenever it is the module's only hook. With any other hook, a
global one, or under ``torch.jit`` tracing, it hands the call to ``_call_impl``, which runs the
pre-hook from the module's hook dict as usual; so it does when the pre-hook has just attached
hooks to the module itself (a step that saves the module's own inputs or outputs).

What could copy the attribute is covered:

* ``Module.compile()`` replaces it; the pre-hook then runs through ``_call_impl`` as before.
* A ``DataParallel`` replica copies the module's ``__dict__``: `PlainReplicas` gives replicas
  ``_call_impl`` back (they must run their own forward, not the original's).
* ``copy.deepcopy`` makes a copy with no `StepCall` (its forward passes are not steps), and
  ``Module.__getstate__`` leaves ``_compiled_call_impl`` out of a pickled model.

`OutputCall` does the same for a forward hook: ``detect_non_finite`` keeps a reference to every
module's outputs at every step, and as a forward hook that would put each module call on the
general path. It is covered the same ways; dynamo is not given it to trace (the watch swaps
it for a forward hook when dynamo starts compiling, `compile_watch`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_globals

_tracing_state = torch._C._get_tracing_state


class StepCall:
    """``_compiled_call_impl`` of a registered module (see the module docstring)."""

    __slots__ = ("module", "hook_id", "pre_hook", "post")

    def __init__(self, module: nn.Module, hook_id: int, pre_hook) -> None:
        self.module = module
        self.hook_id = hook_id
        self.pre_hook = pre_hook
        # called as a forward hook registered after the pre-hook would be, on every path
        # (``detect_non_finite`` keeps the model's outputs so)
        self.post = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        m = self.module
        pre = m._forward_pre_hooks
        g = _module_globals
        if (len(pre) != 1 or self.hook_id not in pre or m._forward_hooks or m._backward_hooks
                or m._backward_pre_hooks or g._global_forward_pre_hooks or g._global_forward_hooks
                or g._global_backward_pre_hooks or g._global_backward_hooks or _tracing_state()):
            output = m._call_impl(*args, **kwargs)
        else:
            self.pre_hook(m, args)
            if m._forward_hooks or m._backward_hooks or m._backward_pre_hooks:
                # The step that began attached hooks to this module (its own inputs or outputs
                # are saved): torch's path runs them, without the pre-hook, which has run.
                callback = pre.pop(self.hook_id)
                try:
                    output = m._call_impl(*args, **kwargs)
                finally:
                    pre[self.hook_id] = callback
            else:
                output = m.forward(*args, **kwargs)
        post = self.post
        if post is not None:
            post(m, args, output)
        return output

    def __deepcopy__(self, memo: dict) -> None:
        return None  # a copy is another model (see `_HookCallback`)

    def __reduce__(self):
        raise TypeError("a StepCall is not pickled (Module.__getstate__ leaves it out)")


class PlainReplicas:
    """The module's ``_replicate_for_data_parallel``: replicas without the `StepCall`."""

    __slots__ = ("module",)

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self) -> nn.Module:
        replica = type(self.module)._replicate_for_data_parallel(self.module)
        state = replica.__dict__
        state.pop("_replicate_for_data_parallel", None)
        if isinstance(state.get("_compiled_call_impl"), (StepCall, OutputCall)):
            del state["_compiled_call_impl"]
        return replica

    def __deepcopy__(self, memo: dict) -> PlainReplicas:
        return PlainReplicas(memo.get(id(self.module), self.module))

    def __reduce__(self):
        return (PlainReplicas, (self.module,))


class OutputCall:
    """``_compiled_call_impl`` of a module whose outputs are watched: ``forward``, then
    ``record(module, args, output)`` as a forward hook is called; with any hook on the module,
    a global one, or under ``torch.jit`` tracing, ``_call_impl`` and then `record`."""

    __slots__ = ("module", "record")

    def __init__(self, module: nn.Module, record) -> None:
        self.module = module
        self.record = record

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        m = self.module
        g = _module_globals
        if (m._forward_pre_hooks or m._forward_hooks or m._backward_hooks or m._backward_pre_hooks
                or g._global_forward_pre_hooks or g._global_forward_hooks
                or g._global_backward_pre_hooks or g._global_backward_hooks or _tracing_state()):
            output = m._call_impl(*args, **kwargs)
        else:
            output = m.forward(*args, **kwargs)
        self.record(m, args, output)
        return output

    def __deepcopy__(self, memo: dict) -> None:
        return None  # (a copy is another model)

    def __reduce__(self):
        raise TypeError("an OutputCall is not pickled (Module.__getstate__ leaves it out)")


def _installable(module: nn.Module) -> bool:
    """`module` is called the standard way and nothing else uses ``_compiled_call_impl``."""
    return (type(module).__call__ is nn.Module.__call__ and hasattr(nn.Module, "_compiled_call_impl")
            and getattr(module, "_compiled_call_impl", None) is None
            and "_replicate_for_data_parallel" not in module.__dict__)


def _put(module: nn.Module, call: StepCall | OutputCall) -> None:
    module.__dict__["_compiled_call_impl"] = call
    module.__dict__["_replicate_for_data_parallel"] = PlainReplicas(module)


def install(module: nn.Module, hook_id: int, pre_hook) -> StepCall | None:
    """Install a `StepCall` on `module` if `_installable`; returns it, or None (the pre-hook
    then works alone)."""
    if not _installable(module):
        return None
    call = StepCall(module, hook_id, pre_hook)
    _put(module, call)
    return call


def install_output_call(module: nn.Module, record) -> OutputCall | None:
    """Install an `OutputCall` on `module` if `_installable`; returns it, or None (a forward
    hook must do)."""
    if not _installable(module):
        return None
    call = OutputCall(module, record)
    _put(module, call)
    return call


def uninstall(module: nn.Module, call: StepCall | OutputCall) -> None:
    """Undo `install` (leaving a ``compile()`` that replaced it alone)."""
    state = module.__dict__
    if state.get("_compiled_call_impl") is call:
        del state["_compiled_call_impl"]  # (the class attribute, None, shows again)
    if isinstance(state.get("_replicate_for_data_parallel"), PlainReplicas):
        del state["_replicate_for_data_parallel"]


__all__ = ["OutputCall", "PlainReplicas", "StepCall", "install", "install_output_call", "uninstall"]
