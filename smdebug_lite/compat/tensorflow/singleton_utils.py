"""``smdebug.tensorflow.singleton_utils``: the same functions as ``smdebug_lite.tensorflow``'s."""

from __future__ import annotations

from smdebug_lite.tensorflow.singleton import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
