"""``smdebug.core.reductions``: reduction tensor names and numpy reductions.

Values are computed by smdebug_lite's `compute_reduction`, the definition the hooks save
reductions with: variance and std are unbiased (ddof=1) and l1/l2 are norms of the flattened
array. smdebug's numpy fallback used ddof=0 and matrix norms, which disagreed with what its own
PyTorch hook saved (see docs/differences.md).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from smdebug_lite.config.reduction_config import ALLOWED_NORMS, ALLOWED_REDUCTIONS
from smdebug_lite.config.reductions import (
    REDUCTIONS_PREFIX,
    compute_reduction,
    parse_reduction_tensor_name,
)
from smdebug_lite.exceptions import SMDebugValueError

_TF_OUTPUT_INDEX = re.compile(r":\d+")


def get_numpy_reduction(reduction_name: str, numpy_data: Any, abs: bool = False) -> np.generic:
    """One reduction (``min``..``prod``, ``l1``, ``l2``) of the whole array, optionally of its
    absolute values. An unknown name is an SMDebugValueError."""
    if reduction_name not in ALLOWED_REDUCTIONS and reduction_name not in ALLOWED_NORMS:
        raise SMDebugValueError(
            f"Invalid reduction type {reduction_name!r}; expected one of "
            f"{', '.join(ALLOWED_REDUCTIONS + ALLOWED_NORMS)}"
        )
    return compute_reduction(reduction_name, np.asarray(numpy_data), abs=abs)


def get_basic_numpy_reduction(reduction_name: str, numpy_data: Any) -> np.generic | None:
    """As `get_numpy_reduction` without abs; None (not an error) for an unknown name."""
    if reduction_name not in ALLOWED_REDUCTIONS and reduction_name not in ALLOWED_NORMS:
        return None
    return compute_reduction(reduction_name, np.asarray(numpy_data))


def get_reduction_tensor_name(
    tensorname: str, reduction_name: str, abs: bool, remove_colon_index: bool = True
) -> str:
    """``smdebug/reductions/[abs_]<reduction>/<tensor>``; TF's ``:0`` output suffixes are
    dropped unless `remove_colon_index` is False."""
    tname = f"{reduction_name}/{tensorname}"
    if remove_colon_index:
        tname = _TF_OUTPUT_INDEX.sub("", tname)
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{tname}"


def reverse_reduction_tensor_name(reduction_tensor_name: str) -> tuple[str, str, bool]:
    """(tensor name, reduction name, abs) of a reduction tensor name."""
    return parse_reduction_tensor_name(reduction_tensor_name)


__all__ = [
    "REDUCTIONS_PREFIX",
    "get_basic_numpy_reduction",
    "get_numpy_reduction",
    "get_reduction_tensor_name",
    "reverse_reduction_tensor_name",
]
