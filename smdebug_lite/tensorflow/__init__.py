"""smdebug-lite for TensorFlow 2 / Keras 3: ``KerasHook`` and the singleton ``get_hook``.

Mirrors ``smdebug.tensorflow``; the TF1 ``SessionHook`` and ``EstimatorHook`` names import but
refuse to be built (TensorFlow 2.16+ has no sessions or estimators).
"""

from __future__ import annotations

from smdebug_lite import modes
from smdebug_lite.config.collection import Collection, CollectionKeys
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.tensorflow.keras_hook import KerasHook
from smdebug_lite.tensorflow.singleton import del_hook, get_hook, set_hook
from smdebug_lite.tensorflow.tf1 import EstimatorHook, SessionHook


def __getattr__(name: str):
    if name == "create_trial":  # smdebug.tensorflow re-exported the trial factory
        from smdebug_lite.trials import create_trial

        return create_trial
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Collection",
    "CollectionKeys",
    "EstimatorHook",
    "KerasHook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SessionHook",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
