"""``smdebug.core.singleton_utils``: the process's current hook, shared by every framework.

The state is smdebug_lite's (`smdebug_lite.hooks.singleton`): a hook set here is the one
``smdebug_lite.pytorch.get_hook()`` returns, and the other way round.
"""

from __future__ import annotations

from typing import Any

from smdebug_lite.exceptions import SMDebugTypeError, SMDebugValueError
from smdebug_lite.hooks import singleton as _singleton
from smdebug_lite.hooks.core import HookCore


def get_hook(*, json_config_path: str | None, hook_class: type | None,
             create_if_not_exists: bool) -> Any:
    """The current hook if it is a `hook_class`; else, with `create_if_not_exists`, one built
    from the DebugHookConfig JSON (None when there is none). Without a `hook_class` the current
    hook is returned as it is, and nothing can be created."""
    if hook_class is None:
        if create_if_not_exists:
            raise SMDebugValueError("get_hook: cannot create a hook without a hook_class")
        return _singleton.current_hook()
    return _singleton.get_hook(hook_class, json_config_path, create_if_not_exists)


def set_hook(custom_hook: Any) -> None:
    """Make `custom_hook` the current hook; it must be a hook (a ``HookCore``)."""
    if not isinstance(custom_hook, HookCore):
        raise SMDebugTypeError(
            f"custom_hook={custom_hook!r} must be a hook (smdebug_lite.hooks.core.HookCore)"
        )
    _singleton.set_hook(custom_hook)


def del_hook() -> None:
    """Forget the current hook (it is not closed)."""
    _singleton.del_hook()


__all__ = ["del_hook", "get_hook", "set_hook"]
