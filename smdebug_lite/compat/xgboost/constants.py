"""``smdebug.xgboost.constants``: the metrics that improve upwards (not losses)."""

from __future__ import annotations

INCREASING_METRICS_REGEX = "^[a-zA-z]+-(auc|map)$"

__all__ = ["INCREASING_METRICS_REGEX"]
