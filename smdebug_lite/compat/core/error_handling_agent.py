"""``smdebug.core.error_handling_agent``: keep smdebug's own failures out of the training loop.

smdebug wrapped the functions a framework calls into (hook callbacks, ``get_hook``) with
``error_handling_agent.catch_smdebug_errors()``. An exception raised inside is logged with its
traceback under ``BASE_ERROR_MESSAGE``, debugging is switched off for the rest of the process
(later calls return the default value without running), and training goes on. That happens
only while the hook runs the default configuration (or before there is a hook): a user who
configured collections of their own gets the exception, since it is likely theirs to fix.

smdebug_lite's hooks already contain their own failures (``HookCore.failsafe``); this agent
serves code written against smdebug's decorator. Every smdebug hook registered itself with the
agent when it was built; here the process's current hook plays that part unless one was set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from smdebug_lite.compat.core.logger import get_logger

BASE_ERROR_MESSAGE = (
    "SMDebug error has occurred, disabling SMDebug for the rest of the training job. Stack trace:"
)

_F = TypeVar("_F", bound=Callable[..., Any])


def _has_default_configuration(hook: Any) -> bool:
    for attr in ("has_default_configuration", "has_default_hook_configuration"):
        check = getattr(hook, attr, None)
        if callable(check):
            try:
                return bool(check())
            except Exception:  # a hook too broken to answer is treated as unconfigured
                return True
    return True


class ErrorHandlingAgent:
    """The process's single agent comes from ``get_error_handling_agent()``."""

    _error_handling_agent: ErrorHandlingAgent._ErrorHandlingAgent | None = None

    class _ErrorHandlingAgent:
        def __init__(self) -> None:
            self.disable_smdebug = False
            self.logger = get_logger()
            self._hook: Any = None

        @property
        def hook(self) -> Any:
            """The hook whose configuration decides: the one set, else the current hook."""
            if self._hook is not None:
                return self._hook
            from smdebug_lite.hooks.singleton import current_hook

            return current_hook()

        @hook.setter
        def hook(self, hook: Any) -> None:
            self._hook = hook

        def set_hook(self, hook: Any) -> None:
            self._hook = hook

        def _default(self, default_return_val: Any, args: tuple, kwargs: dict) -> Any:
            # A callable default computes the value from the wrapped call's own arguments.
            if callable(default_return_val):
                return default_return_val(*args, **kwargs)
            return default_return_val

        def _disable(self, hook: Any, error: Exception) -> None:
            self.logger.error(BASE_ERROR_MESSAGE)
            self.logger.exception(error)
            self.disable_smdebug = True
            if hook is not None and hasattr(hook, "disabled"):
                hook.disabled = True  # the hook stops capturing; its files stay readable

        def catch_smdebug_errors(self, default_return_val: Any = None) -> Callable[[_F], _F]:
            """Decorator: run the function unless debugging is off; contain its failures."""

            def wrapper(func: _F) -> _F:
                @functools.wraps(func)
                def guarded(*args: Any, **kwargs: Any) -> Any:
                    if self.disable_smdebug:
                        return self._default(default_return_val, args, kwargs)
                    try:
                        return func(*args, **kwargs)
                    except Exception as e:
                        hook = self.hook
                        if hook is not None and not _has_default_configuration(hook):
                            raise
                        self._disable(hook, e)
                        return self._default(default_return_val, args, kwargs)

                return guarded  # type: ignore[return-value]

            return wrapper

    @classmethod
    def get_error_handling_agent(cls) -> ErrorHandlingAgent._ErrorHandlingAgent:
        if cls._error_handling_agent is None:
            cls._error_handling_agent = cls._ErrorHandlingAgent()
        return cls._error_handling_agent


__all__ = ["BASE_ERROR_MESSAGE", "ErrorHandlingAgent"]
