"""smdebug-lite for TensorFlow 2 / Keras 3: ``KerasHook`` and the singleton ``get_hook``.

Mirrors ``smdebug.tensorflow``; the TF1 session and estimator hooks do not exist here.
"""

from __future__ import annotations

from smdebug_lite import modes
from smdebug_lite.config.collection import Collection, CollectionKeys
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.tensorflow.keras_hook import KerasHook
from smdebug_lite.tensorflow.singleton import del_hook, get_hook, set_hook

__all__ = [
    "Collection",
    "CollectionKeys",
    "KerasHook",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
