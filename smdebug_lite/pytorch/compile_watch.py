"""Forward hooks that torch.compile can see: kept in place once dynamo compiles anything.

The hook moves its forward hooks (losses, module inputs/outputs) out of the modules' hook dicts
during steps that save nothing. Dynamo reads those dicts when it traces a module and does not
guard on them, so a model first traced during such a step would run without our hooks for good:
its losses and outputs would never be saved. Dynamo calls its compile-start callbacks before it
traces a frame; from the first one on, every hook that watches keeps its forward hooks attached
(they return at once on steps that save nothing), so whatever dynamo traces next calls them.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from smdebug_lite.log.logger import get_logger

logger = get_logger(__name__)


class KeepsForwardHooks(Protocol):
    def keep_forward_hooks(self) -> None: ...


_watching: weakref.WeakSet = weakref.WeakSet()


def _on_compile_start(_args: Any) -> None:
    for hook in list(_watching):
        try:  # (an error here would fail the user's compilation)
            hook.keep_forward_hooks()
        except Exception:
            logger.debug("keep_forward_hooks failed", exc_info=True)


def _installed() -> bool:
    """Our callback is registered with dynamo (again: ``torch._dynamo.reset()`` clears them)."""
    try:
        from torch._dynamo.callback import callback_handler  # a private API

        if _on_compile_start not in callback_handler.start_callbacks:
            callback_handler.register_start_callback(_on_compile_start)
        return True
    except Exception:
        return False


def watch(hook: KeepsForwardHooks) -> bool:
    """Tell `hook` when dynamo starts compiling. False when this torch cannot say: the hook
    should then keep its forward hooks attached from now on. Call it before the model is
    first compiled (at registration)."""
    if not _installed():
        return False
    _watching.add(hook)
    return True


def unwatch(hook: KeepsForwardHooks) -> None:
    _watching.discard(hook)


def compiled_before(classes: Iterable[type]) -> list[str]:
    """The names of `classes` whose ``forward`` dynamo has compiled code for already in this
    process. Dynamo reuses that code for a new instance without checking its module hooks, so
    a model of such a class registered now may have its inputs and outputs go unsaved. Empty
    when dynamo was never imported, or when this torch cannot say (a private API)."""
    if "torch._dynamo" not in sys.modules:
        return []
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    except Exception:
        return []
    found = []
    for cls in dict.fromkeys(classes):
        code = getattr(getattr(cls, "forward", None), "__code__", None)
        try:
            if code is not None and _debug_get_cache_entry_list(code):
                found.append(cls.__qualname__)
        except Exception:
            return []
    return found


__all__ = ["compiled_before", "unwatch", "watch"]
