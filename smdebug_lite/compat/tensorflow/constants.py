"""``smdebug.tensorflow.constants``: the names smdebug's TF hooks used, with smdebug's values."""

from __future__ import annotations

# Keys under which smdebug's Keras hook passed tensors through a model's outputs.
SMDEBUG_GRADIENTS_KEY = "smdebug_gradients"
SMDEBUG_LAYER_OUTPUTS_KEY = "smdebug_layer_outputs"
SMDEBUG_PREFIX = "smdebug_"

# The collections a TF hook saves when none are configured (losses, metrics, sm_metrics).
TF_DEFAULT_SAVED_COLLECTIONS = ["losses", "metrics", "sm_metrics"]

__all__ = [
    "SMDEBUG_GRADIENTS_KEY",
    "SMDEBUG_LAYER_OUTPUTS_KEY",
    "SMDEBUG_PREFIX",
    "TF_DEFAULT_SAVED_COLLECTIONS",
]
