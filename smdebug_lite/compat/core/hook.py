"""``smdebug.core.hook``: the base hook names, for ``isinstance`` and ``issubclass`` checks.

Every smdebug_lite hook (PyTorch, Keras, XGBoost) derives from ``HookCore``, which therefore
stands for both of smdebug's bases: ``BaseHook`` (all hooks) and ``CallbackHook`` (the
callback-driven PyTorch and MXNet hooks).
"""

from __future__ import annotations

from smdebug_lite.hooks.core import HookCore

BaseHook = HookCore
CallbackHook = HookCore

__all__ = ["BaseHook", "CallbackHook"]
