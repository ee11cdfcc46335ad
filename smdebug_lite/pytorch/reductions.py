"""Reductions of torch tensors, computed with torch ops on the tensor's own device.

The values match what smdebug's PyTorch hook saved: ``variance``/``std`` are unbiased (torch's
default), ``l1``/``l2`` are vector norms of the flattened tensor, ``abs`` is applied first, and the
result keeps the tensor's dtype. Where torch has no op for a dtype (the mean of an int tensor, the
norm of a bool tensor) the value is computed in float64 instead of failing. The counts
(``num_nan``, ``num_inf``, ``num_zero``, see `smdebug_lite.config.reductions`) are int64, still on the
device, so a step's NaN accounting costs no extra host synchronisation.
"""

from __future__ import annotations

import numpy as np
import torch

from smdebug_lite.config.reductions import check_reducible, is_count
from smdebug_lite.exceptions import TensorNotReducible

_FLOAT_ONLY = frozenset({"mean", "variance", "std", "l1", "l2"})


def _prepare(t: torch.Tensor, reduction: str, is_abs: bool) -> torch.Tensor:
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.is_complex() and (is_abs or reduction in ("min", "max")):
        t = t.abs()
    elif is_abs:
        t = t.abs()
    if reduction in _FLOAT_ONLY and not (t.is_floating_point() or t.is_complex()):
        t = t.to(torch.float64)
    return t


def reduce_tensor(t: torch.Tensor, reduction: str, is_abs: bool,
                  tensor_name: str | None = None) -> torch.Tensor:
    """One reduction as a 0-d tensor on t's device (no host synchronisation).

    A dtype torch has no kernel for (float8, quantized, min/max or abs of uint16/32/64) raises
    TensorNotReducible (a TypeError and an SMDebugValueError) naming `tensor_name`, the
    reduction and the dtype.
    """
    if not isinstance(t, torch.Tensor):
        check_reducible(np.asarray(t).dtype, reduction, is_abs, tensor_name)
        t = torch.as_tensor(t)
    try:
        return _reduce(t, reduction, is_abs)
    except NotImplementedError as e:
        raise TensorNotReducible(tensor_name, reduction, t.dtype, is_abs) from e
    except RuntimeError as e:
        if t.is_quantized or "Unsupported dtype" in str(e):
            raise TensorNotReducible(tensor_name, reduction, t.dtype, is_abs) from e
        raise


def _count(t: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "num_zero":
        return torch.count_nonzero(t == 0)
    if not (t.is_floating_point() or t.is_complex()):
        return torch.zeros((), dtype=torch.int64, device=t.device)
    return torch.count_nonzero(torch.isnan(t) if reduction == "num_nan" else torch.isinf(t))


def _reduce(t: torch.Tensor, reduction: str, is_abs: bool) -> torch.Tensor:
    if is_count(reduction):
        return _count(t, reduction)  # the same with or without abs
    x = _prepare(t, reduction, is_abs)
    if reduction == "min":
        return x.min()
    if reduction == "max":
        return x.max()
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "prod":
        return x.prod()
    if reduction in ("variance", "std"):
        if x.numel() < 2:  # unbiased estimate undefined; torch would also warn every step
            return torch.full((), float("nan"), dtype=x.dtype, device=x.device)
        return x.var() if reduction == "variance" else x.std()
    if reduction == "l1":
        return torch.linalg.vector_norm(x, ord=1)
    if reduction == "l2":
        return torch.linalg.vector_norm(x, ord=2)
    raise ValueError(f"reduction={reduction!r} is not supported")


__all__ = ["reduce_tensor"]
