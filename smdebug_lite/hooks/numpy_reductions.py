"""Reductions of numpy arrays with the semantics the PyTorch hook saves them with.

Used for values that are already numpy (save_tensor, XGBoost, TF fallbacks): variance and std
are unbiased (ddof=1, as torch computes them) and l1/l2 norms are over the flattened array.
"""

from __future__ import annotations

import numpy as np

from smdebug_lite.reductions import check_reducible


def compute(arr: np.ndarray, reduction: str, is_abs: bool,
            tensor_name: str | None = None) -> np.ndarray:
    """One reduction as a 0-d array; TensorNotReducible (a TypeError and an SMDebugValueError)
    for str/bytes/object arrays, naming `tensor_name` when given."""
    arr = np.asarray(arr)
    check_reducible(arr.dtype, reduction, is_abs, tensor_name)
    x = np.abs(arr) if is_abs else arr
    if x.dtype.kind == "b":
        x = x.astype(np.float32)
    flat = x.reshape(-1)
    if reduction == "min":
        out = flat.min()
    elif reduction == "max":
        out = flat.max()
    elif reduction == "mean":
        out = flat.mean(dtype=np.float64).astype(x.dtype if x.dtype.kind == "f" else np.float64)
    elif reduction == "sum":
        out = flat.sum()
    elif reduction == "prod":
        out = flat.prod()
    elif reduction == "variance":
        out = flat.var(ddof=1) if flat.size > 1 else np.array(np.nan, dtype=np.float64)
    elif reduction == "std":
        out = flat.std(ddof=1) if flat.size > 1 else np.array(np.nan, dtype=np.float64)
    elif reduction == "l1":
        out = np.abs(flat).sum()
    elif reduction == "l2":
        out = np.sqrt(np.square(flat.astype(np.float64)).sum()).astype(
            x.dtype if x.dtype.kind == "f" else np.float64)
    else:
        raise ValueError(f"reduction={reduction!r} is not supported")
    return np.asarray(out)
