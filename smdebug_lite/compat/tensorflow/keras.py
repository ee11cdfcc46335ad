"""``smdebug.tensorflow.keras``: the module smdebug's ``KerasHook`` lived in."""

from __future__ import annotations

from smdebug_lite.tensorflow import KerasHook

__all__ = ["KerasHook"]
