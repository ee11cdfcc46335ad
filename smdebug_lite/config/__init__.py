"""Configuration model: save schedules, reductions, collections and the SageMaker hook JSON."""

from __future__ import annotations

from smdebug_lite.config.collection import (
    DEFAULT_INCLUDE_COLLECTIONS,
    DEFAULT_SAVED_COLLECTIONS,
    EVAL_PREDICT_SKIPPED_COLLECTIONS,
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    PYTORCH_EXTENSION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    SUMMARIES_COLLECTIONS,
    Collection,
    CollectionKeys,
    builtin_collections,
    default_include_collections,
)
from smdebug_lite.config.collection_manager import CollectionManager, CollectionNotFound
from smdebug_lite.config.hook_json import (
    CollectionSettings,
    HookConfigError,
    HookSettings,
    config_file_path,
    parse_hook_config,
    parse_hook_config_dict,
)
from smdebug_lite.config.reduction_config import (
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    ReductionConfig,
    parse_reductions_string,
)
from smdebug_lite.config.save_config import DEFAULT_SAVE_INTERVAL, SaveConfig, SaveConfigMode

__all__ = [
    "ALLOWED_NORMS",
    "ALLOWED_REDUCTIONS",
    "DEFAULT_INCLUDE_COLLECTIONS",
    "DEFAULT_SAVED_COLLECTIONS",
    "DEFAULT_SAVE_INTERVAL",
    "EVAL_PREDICT_SKIPPED_COLLECTIONS",
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "PYTORCH_EXTENSION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "SM_METRIC_COLLECTIONS",
    "SUMMARIES_COLLECTIONS",
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "CollectionNotFound",
    "CollectionSettings",
    "HookConfigError",
    "HookSettings",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "builtin_collections",
    "config_file_path",
    "default_include_collections",
    "parse_hook_config",
    "parse_hook_config_dict",
    "parse_reductions_string",
]
