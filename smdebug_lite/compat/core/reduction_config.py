"""``smdebug.core.reduction_config``: what to save of a tensor. The class is smdebug_lite's own."""

from __future__ import annotations

from smdebug_lite.config.reduction_config import (
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    REDUCTION_CONFIG_KEYS,
    ReductionConfig,
)

# The version tag smdebug gave the reduction-config JSON schema.
REDUCTION_CONFIG_VERSION_NUM = "v0"
# The keys a ReductionConfig's JSON form may hold.
ALLOWED_PARAMS = list(REDUCTION_CONFIG_KEYS)

__all__ = [
    "ALLOWED_NORMS",
    "ALLOWED_PARAMS",
    "ALLOWED_REDUCTIONS",
    "REDUCTION_CONFIG_VERSION_NUM",
    "ReductionConfig",
]
