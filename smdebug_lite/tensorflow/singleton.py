"""``smdebug_lite.tensorflow.get_hook``: the Keras hook of this process, from the JSON if asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from smdebug_lite.hooks import singleton as _singleton
from smdebug_lite.hooks.singleton import del_hook, set_hook
from smdebug_lite.log.logger import get_logger

if TYPE_CHECKING:
    from smdebug_lite.tensorflow.keras_hook import KerasHook

logger = get_logger(__name__)


def get_hook(
    hook_type: str | None = "keras",
    json_config_path: str | None = None,
    create_if_not_exists: bool = False,
) -> KerasHook | None:
    """The current Keras hook; with `create_if_not_exists`, one built from SageMaker's
    DebugHookConfig JSON. None when there is no config, when USE_SMDEBUG is false, or when the
    config is unusable (reported once). Only "keras" exists in TF2: the "session" and
    "estimator" hooks were TF1 graph APIs and give None with an error message."""
    from smdebug_lite.tensorflow.keras_hook import KerasHook

    if hook_type not in (None, "keras"):
        logger.error("get_hook(hook_type=%r): smdebug-lite has only the 'keras' hook for "
                     "TensorFlow 2; session and estimator hooks were TF1 APIs", hook_type)
        return None
    return _singleton.get_hook(KerasHook, json_config_path, create_if_not_exists)


__all__ = ["del_hook", "get_hook", "set_hook"]
