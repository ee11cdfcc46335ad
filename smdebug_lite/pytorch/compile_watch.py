"""Forward hooks that torch.compile can see: kept in place once dynamo compiles anything.

The hook moves its forward hooks (losses, module inputs/outputs) out of the modules' hook dicts
during steps that save nothing. Dynamo reads those dicts when it traces a module and does not
guard on them, so a model first traced during such a step would run without our hooks for good:
its losses and outputs would never be saved. Dynamo calls its compile-start callbacks before it
traces a frame; from the first one on, every hook that watches keeps its forward hooks attached
(they return at once on steps that save nothing), so whatever dynamo traces next calls them.
"""

from __future__ import annotations

import weakref
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


__all__ = ["unwatch", "watch"]
