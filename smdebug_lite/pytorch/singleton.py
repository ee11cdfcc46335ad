"""``smdebug_lite.pytorch.get_hook``: the PyTorch hook of this process, from the JSON if asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from smdebug_lite.hooks import singleton as _singleton
from smdebug_lite.hooks.singleton import del_hook, set_hook

if TYPE_CHECKING:
    from smdebug_lite.pytorch.hook import Hook


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = False) -> Hook | None:
    """The current PyTorch hook; with `create_if_not_exists`, one built from SageMaker's
    DebugHookConfig JSON (`json_config_path`, else $SMDEBUG_CONFIG_FILE_PATH, else
    /opt/ml/input/config/debughookconfig.json). None when there is no config, when
    USE_SMDEBUG is false, or when the config is unusable (reported once)."""
    from smdebug_lite.pytorch.hook import Hook

    return _singleton.get_hook(Hook, json_config_path, create_if_not_exists)


__all__ = ["del_hook", "get_hook", "set_hook"]
