"""``smdebug.pytorch.singleton_utils``: the same functions as ``smdebug_lite.pytorch``'s."""

from __future__ import annotations

from smdebug_lite.pytorch.singleton import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
