"""The process-wide hook that framework integrations (and the zero-code-change launcher) share.

One hook per process, as in smdebug: constructing a hook makes it the current one, and
``get_hook(..., create_if_not_exists=True)`` builds one from SageMaker's DebugHookConfig JSON.
No config file, or ``USE_SMDEBUG`` set to a false value, means no hook (None), never an error.
A config file that cannot be used is reported once, clearly, and also gives None, so that
training runs on without debugging.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from smdebug_lite.config.hook_json import HookConfigError, config_file_path
from smdebug_lite.hooks import registry
from smdebug_lite.log.logger import get_logger

logger = get_logger(__name__)

USE_SMDEBUG_ENV = "USE_SMDEBUG"
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})

_lock = threading.RLock()
_reported: set[str] = set()


def smdebug_enabled() -> bool:
    """False when USE_SMDEBUG is 0/false/no/off (any case)."""
    return os.environ.get(USE_SMDEBUG_ENV, "true").strip().lower() not in _FALSE


def set_hook(hook: Any) -> None:
    registry.set_current(hook)


def del_hook() -> None:
    registry.set_current(None)


def current_hook() -> Any:
    return registry.current()


def _report_once(path: str, message: str) -> None:
    if path not in _reported:
        _reported.add(path)
        logger.error("smdebug-lite is off for this run: %s", message)


def get_hook(hook_class: type, json_config_path: str | None = None,
             create_if_not_exists: bool = False) -> Any:
    """The current hook if it is a `hook_class`; else, when asked to, one built from the JSON."""
    if not smdebug_enabled():
        return None
    with _lock:
        hook = registry.current()
        if hook is not None and not isinstance(hook, hook_class):
            logger.info("The current hook is a %s, not a %s; replacing it",
                        type(hook).__name__, hook_class.__name__)
            hook = None
            registry.set_current(None)
        if hook is not None or not create_if_not_exists:
            return hook
        path = config_file_path(json_config_path)
        if not os.path.isfile(path):
            logger.debug("No hook configuration at %s: debugging is off", path)
            return None
        try:
            hook = hook_class.create_from_json_file(path)
        except HookConfigError as e:
            _report_once(path, str(e))
            return None
        except Exception as e:  # e.g. an out_dir holding a finished run: still not fatal
            _report_once(path, f"could not create a hook from {path}: {type(e).__name__}: {e}")
            return None
        registry.set_current(hook)
        return hook


__all__ = ["USE_SMDEBUG_ENV", "current_hook", "del_hook", "get_hook", "set_hook", "smdebug_enabled"]
