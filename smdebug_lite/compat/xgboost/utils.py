"""``smdebug.xgboost.utils``: XGBoost version checks, content types and tree tables.

``parse_tree_model(booster, iteration)`` returns the trees of boosting round `iteration` as
columns (``Tree``, ``Node``, ``ID``, ``Feature``, ``Split``, ``Yes``, ``No``, ``Missing``,
``Gain``, ``Cover``, ``Category``), sorted by tree and node, as the XGBoost hook saves them under
``trees/``. For binary and regression models that is the one tree smdebug returned; for
multi-class and random-forest models it is every tree the round added (smdebug returned the tree
whose global index equalled the round number).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from smdebug_lite.compat.core.utils import version_tuple
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.xgboost.trees import round_tree_table

CSV = "csv"
LIBSVM = "libsvm"
_CONTENT_TYPES = {
    "csv": CSV,
    "text/csv": CSV,
    "libsvm": LIBSVM,
    "text/libsvm": LIBSVM,
    "text/x-libsvm": LIBSVM,
}


def _xgb_version() -> tuple[int, ...]:
    try:
        return version_tuple(version("xgboost"))
    except PackageNotFoundError:
        return ()


def is_xgb_1_3_and_later() -> bool:
    return _xgb_version() >= (1, 3)


def is_xgb_1_5_and_later() -> bool:
    return _xgb_version() >= (1, 5)


def is_xgb_1_7_and_later() -> bool:
    return _xgb_version() >= (1, 7)


def get_content_type(content_type_cfg_val: str | None) -> str:
    """``"csv"`` or ``"libsvm"`` from a SageMaker ContentType (parameters after ``;`` ignored);
    None means libsvm, XGBoost's default input."""
    if content_type_cfg_val is None:
        return LIBSVM
    content_type = content_type_cfg_val.split(";")[0].strip().lower()
    if content_type not in _CONTENT_TYPES:
        raise SMDebugValueError(
            f"ContentType={content_type_cfg_val!r} is not accepted; expected one of "
            f"{', '.join(_CONTENT_TYPES)}"
        )
    return _CONTENT_TYPES[content_type]


def parse_tree_model(booster: Any, iteration: int, fmap: str = "") -> dict[str, np.ndarray]:
    """The trees of round `iteration` as columns. `fmap` is accepted for smdebug's signature;
    feature names come from the booster itself."""
    return round_tree_table(booster, iteration)


__all__ = [
    "CSV",
    "LIBSVM",
    "get_content_type",
    "is_xgb_1_3_and_later",
    "is_xgb_1_5_and_later",
    "is_xgb_1_7_and_later",
    "parse_tree_model",
]
