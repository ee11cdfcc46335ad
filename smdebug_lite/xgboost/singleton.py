"""``smdebug_lite.xgboost.get_hook``: the XGBoost hook of this process, from the JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

from smdebug_lite.hooks import singleton as _singleton
from smdebug_lite.hooks.singleton import del_hook, set_hook

if TYPE_CHECKING:
    from smdebug_lite.xgboost.hook import Hook


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = True) -> Hook | None:
    """The current XGBoost hook, else one built from SageMaker's DebugHookConfig JSON (smdebug's
    XGBoost getter always creates). None when there is no config, when USE_SMDEBUG is false, or
    when the config is unusable (reported once)."""
    from smdebug_lite.xgboost.hook import Hook

    return _singleton.get_hook(Hook, json_config_path, create_if_not_exists)


__all__ = ["del_hook", "get_hook", "set_hook"]
