"""``smdebug.pytorch.utils``: reductions of torch tensors and torch version checks.

Reductions are the PyTorch hook's own (`smdebug_lite.pytorch.reductions`): unbiased variance and
std, vector norms of the flattened tensor, abs applied first. Supported torch versions are
smdebug-lite's (2.1 and later), not smdebug's (1.5 to 2.x).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from smdebug_lite.compat.core.reductions import get_numpy_reduction
from smdebug_lite.compat.core.utils import MIN_SUPPORTED_PT_VERSION, version_tuple
from smdebug_lite.compat.core.utils import make_numpy_array as _make_numpy_array
from smdebug_lite.config.reduction_config import ALLOWED_NORMS, ALLOWED_REDUCTIONS
from smdebug_lite.exceptions import SMDebugError
from smdebug_lite.pytorch.reductions import reduce_tensor

PT_VERSION = version_tuple(torch.__version__)


def get_reduction_of_data(
    reduction_name: str, tensor_data: Any, tensor_name: str, abs: bool = False
) -> Any:
    """A reduction of a torch tensor (a 0-d tensor) or of a numpy array (a numpy scalar).

    Names other than smdebug's reductions and norms are looked up as a ``torch`` function
    (``"median"`` -> ``torch.median``), as smdebug did; anything else is an SMDebugError naming
    the tensor.
    """
    if isinstance(tensor_data, np.ndarray):
        return get_numpy_reduction(reduction_name, tensor_data, abs)
    if reduction_name in ALLOWED_REDUCTIONS or reduction_name in ALLOWED_NORMS:
        return reduce_tensor(tensor_data, reduction_name, abs)
    op = getattr(torch, reduction_name, None)
    if callable(op):
        return op(torch.abs(tensor_data) if abs else tensor_data)
    raise SMDebugError(f"Invalid reduction_name {reduction_name!r} for tensor {tensor_name!r}")


def make_numpy_array(x: Any) -> np.ndarray:
    """A numpy array from a torch tensor (detached, on the CPU) or anything the core helper
    accepts."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return _make_numpy_array(x)


def _is_pt(major: int, minor: int) -> Callable[[], bool]:
    """smdebug's ``is_pt_<major>_<minor>()``: whether the installed torch is that release."""

    def check() -> bool:
        return PT_VERSION[:2] == (major, minor)

    check.__name__ = check.__qualname__ = f"is_pt_{major}_{minor}"
    return lru_cache(maxsize=1)(check)


is_pt_1_5 = _is_pt(1, 5)
is_pt_1_6 = _is_pt(1, 6)
is_pt_1_7 = _is_pt(1, 7)
is_pt_1_8 = _is_pt(1, 8)
is_pt_1_9 = _is_pt(1, 9)


def is_current_version_supported(pytorch_version: str = torch.__version__) -> bool:
    """Whether smdebug-lite's PyTorch hook supports this torch version (2.1 or later)."""
    return version_tuple(pytorch_version) >= MIN_SUPPORTED_PT_VERSION


__all__ = [
    "PT_VERSION",
    "get_reduction_of_data",
    "is_current_version_supported",
    "is_pt_1_5",
    "is_pt_1_6",
    "is_pt_1_7",
    "is_pt_1_8",
    "is_pt_1_9",
    "make_numpy_array",
]
