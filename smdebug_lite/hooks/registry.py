"""Which hooks exist in this process: the open ones (closed at exit or on SIGTERM by
`shutdown`) and the current one (what `get_hook()` returns, as in smdebug: the newest).

Hooks are held weakly in the open set, so a hook the script dropped does not stay alive for it.
A forked child (a DataLoader worker, ``os.fork``) starts with no open hooks: closing its
parent's at the child's exit would end the parent's run on disk while it still trains.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

_lock = threading.RLock()
_open: weakref.WeakSet = weakref.WeakSet()
_current: Any = None


def track(hook: Any) -> None:
    """`hook` is open (until `forget`)."""
    with _lock:
        _open.add(hook)


def forget(hook: Any) -> None:
    with _lock:
        _open.discard(hook)


def live_hooks() -> list[Any]:
    """The hooks open now, in no particular order."""
    with _lock:
        return list(_open)


def set_current(hook: Any) -> None:
    global _current
    with _lock:
        _current = hook


def current() -> Any:
    return _current


def _forget_open_hooks_in_forked_child() -> None:
    _open.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_open_hooks_in_forked_child)


__all__ = ["current", "forget", "live_hooks", "set_current", "track"]
