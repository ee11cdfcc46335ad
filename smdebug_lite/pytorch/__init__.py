"""PyTorch integration: ``import smdebug_lite.pytorch as smd`` as with ``smdebug.pytorch``."""

from __future__ import annotations

from smdebug_lite import modes
from smdebug_lite.config import CollectionKeys, ReductionConfig, SaveConfig, SaveConfigMode
from smdebug_lite.pytorch.collection import Collection
from smdebug_lite.pytorch.hook import Hook
from smdebug_lite.pytorch.singleton import del_hook, get_hook, set_hook


def __getattr__(name: str):
    if name == "create_trial":  # smdebug.pytorch re-exported the trial factory
        from smdebug_lite.trials import create_trial

        return create_trial
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Collection",
    "CollectionKeys",
    "Hook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
