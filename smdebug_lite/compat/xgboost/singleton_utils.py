"""``smdebug.xgboost.singleton_utils``: the same functions as ``smdebug_lite.xgboost``'s."""

from __future__ import annotations

from smdebug_lite.xgboost.singleton import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
