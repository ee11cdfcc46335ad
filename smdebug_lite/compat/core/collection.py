"""``smdebug.core.collection``: collections and the built-in collection name sets.

``Collection`` and ``CollectionKeys`` are smdebug_lite's own classes. The sets keep smdebug's
names and members; the ones smdebug_lite also uses (scalar, SageMaker-metric, non-reduction
collections) are smdebug_lite's frozensets, so they cannot be changed behind the hooks' back.
"""

from __future__ import annotations

from smdebug_lite.config.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    SUMMARIES_COLLECTIONS,
    Collection,
    CollectionKeys,
)

# The keys a collection's JSON form may hold.
ALLOWED_PARAMS = [
    "name",
    "include_regex",
    "reduction_config",
    "save_config",
    "tensor_names",
    "save_histogram",
]

_K = CollectionKeys
# The collections each framework's hook creates on its own.
DEFAULT_TF_COLLECTIONS = {
    _K.ALL, _K.DEFAULT, _K.WEIGHTS, _K.BIASES, _K.GRADIENTS, _K.LOSSES, _K.METRICS, _K.INPUTS,
    _K.OUTPUTS, _K.LAYERS, _K.SM_METRICS, _K.OPTIMIZER_VARIABLES,
}
DEFAULT_PYTORCH_COLLECTIONS = {_K.ALL, _K.DEFAULT, _K.WEIGHTS, _K.BIASES, _K.GRADIENTS, _K.LOSSES}
DEFAULT_MXNET_COLLECTIONS = set(DEFAULT_PYTORCH_COLLECTIONS)
# XGBoost's hook also creates "metrics" and "losses", which smdebug left out of this set.
DEFAULT_XGBOOST_COLLECTIONS = {
    _K.ALL, _K.DEFAULT, _K.HYPERPARAMETERS, _K.PREDICTIONS, _K.LABELS, _K.FEATURE_IMPORTANCE,
    _K.AVERAGE_SHAP, _K.FULL_SHAP, _K.TREES,
}

__all__ = [
    "ALLOWED_PARAMS",
    "DEFAULT_MXNET_COLLECTIONS",
    "DEFAULT_PYTORCH_COLLECTIONS",
    "DEFAULT_TF_COLLECTIONS",
    "DEFAULT_XGBOOST_COLLECTIONS",
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "SM_METRIC_COLLECTIONS",
    "SUMMARIES_COLLECTIONS",
    "Collection",
    "CollectionKeys",
]
