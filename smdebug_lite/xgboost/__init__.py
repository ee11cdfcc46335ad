"""smdebug-lite for XGBoost: ``Hook`` (a TrainingCallback) and the singleton ``get_hook``."""

from __future__ import annotations

from smdebug_lite import modes
from smdebug_lite.config.collection import Collection, CollectionKeys
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.xgboost.hook import Hook
from smdebug_lite.xgboost.singleton import del_hook, get_hook, set_hook


def __getattr__(name: str):
    if name == "create_trial":  # smdebug.xgboost re-exported the trial factory
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
