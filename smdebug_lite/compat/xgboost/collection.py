"""``smdebug.xgboost.collection``: XGBoost's collection manager, with its built-ins.

``CollectionManager()`` starts with the collections the XGBoost hook creates (hyperparameters,
metrics, losses, predictions, labels, feature_importance, average_shap, full_shap, trees, plus
all and default), with smdebug's regexes, in a fixed order.
"""

from __future__ import annotations

from typing import Any

from smdebug_lite.compat.core.collection import DEFAULT_XGBOOST_COLLECTIONS
from smdebug_lite.compat.core.collection_manager import CollectionManager as _CoreManager
from smdebug_lite.config.collection import Collection, CollectionKeys


class CollectionManager(_CoreManager):
    def __init__(self, create_default: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("framework", "xgboost")
        super().__init__(create_default=create_default, **kwargs)


__all__ = ["DEFAULT_XGBOOST_COLLECTIONS", "Collection", "CollectionKeys", "CollectionManager"]
