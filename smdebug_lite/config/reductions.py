"""Reductions: their names, the tensor names they are stored under, and their numpy definition.

This is the one home of the reduction vocabulary. Configs validate against it, hooks name the
tensors they write with it, the reader parses those names back with it, and values that are
already numpy (``save_tensor``, TF's non-float tensors, and the reader when only the raw tensor
was saved) are reduced by `compute_reduction`. The PyTorch and TF hooks compute the same
definitions with their own ops on the tensor's device (``pytorch/reductions.py``,
``tensorflow/reductions.py``).

The definitions are those of the PyTorch hook: variance and std are unbiased (ddof=1; NaN for
fewer than two elements, as in torch), l1/l2 are norms of the flattened tensor, half precision
accumulates in float32. smdebug's numpy fallback used ddof=0 and matrix norms for 2-D arrays, so
the same query gave different numbers depending on whether the reduction had been saved; here
both paths agree.

``num_nan``, ``num_inf`` and ``num_zero`` are smdebug-lite extensions: element counts (int64)
that make NaN/Inf accounting cheap. smdebug reads their tensors like any other reduction, but
its ReductionConfig rejects the names, so the collections file lists them apart
(``config/reduction_config.py``).
"""

from __future__ import annotations

import re

import numpy as np

from smdebug_lite.exceptions import SMDebugValueError, TensorNotReducible

REDUCTIONS_PREFIX = "smdebug/reductions/"
# smdebug's vocabulary (lists, as smdebug exports them).
ALLOWED_REDUCTIONS = ["min", "max", "mean", "std", "variance", "sum", "prod"]
ALLOWED_NORMS = ["l1", "l2"]
# smdebug-lite extensions: element counts. abs_ variants would equal the plain ones.
COUNT_REDUCTIONS = ["num_nan", "num_inf", "num_zero"]
ALL_REDUCTIONS = tuple(ALLOWED_REDUCTIONS + ALLOWED_NORMS + COUNT_REDUCTIONS)

# dtype kinds with no arithmetic: str, bytes, object, structured.
UNREDUCIBLE_KINDS = frozenset("USOV")

_TF_OUTPUT_INDEX = re.compile(r":\d+")
_NAMES = frozenset(ALL_REDUCTIONS)
_COUNTS = frozenset(COUNT_REDUCTIONS)


# -- names ---------------------------------------------------------------------------------------


def reduction_tensor_name(tensor_name: str, reduction: str, abs: bool = False,
                          keep_tf_suffix: bool = False) -> str:
    """``smdebug/reductions/[abs_]<reduction>/<tensor>``, the name a hook stores a reduction
    under. TF output indices (``:0``) are dropped, as smdebug's hooks did, unless
    `keep_tf_suffix`."""
    base = tensor_name if keep_tf_suffix else _TF_OUTPUT_INDEX.sub("", tensor_name)
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{reduction}/{base}"


def is_reduction_tensor_name(name: str) -> bool:
    return name.startswith(REDUCTIONS_PREFIX)


def parse_reduction_tensor_name(name: str) -> tuple[str, str, bool]:
    """(base tensor name, reduction name, abs) from a stored reduction tensor name."""
    if not name.startswith(REDUCTIONS_PREFIX):
        raise SMDebugValueError(f"{name!r} is not a reduction tensor name ({REDUCTIONS_PREFIX}...)")
    red, sep, base = name[len(REDUCTIONS_PREFIX) :].partition("/")
    if not sep or not base or not red:
        raise SMDebugValueError(
            f"{name!r}: expected {REDUCTIONS_PREFIX}[abs_]<reduction>/<tensor name>"
        )
    is_abs = red.startswith("abs_")
    return base, red[4:] if is_abs else red, is_abs


def check_reduction_name(name: str) -> str:
    if name not in _NAMES:
        raise SMDebugValueError(
            f"Invalid reduction type {name!r}; expected one of {', '.join(ALL_REDUCTIONS)}"
        )
    return name


def is_count(name: str) -> bool:
    """True for the element counts (num_nan, num_inf, num_zero)."""
    return name in _COUNTS


# -- numpy definition ----------------------------------------------------------------------------

_FLOAT_UFUNCS = {
    "min": np.minimum.reduce,
    "max": np.maximum.reduce,
    "sum": np.add.reduce,
    "prod": np.multiply.reduce,
}


def _float_reduction(name: str, flat: np.ndarray) -> np.generic:
    """Reductions of a 1-D float array straight through the ufuncs (numpy's methods add
    several microseconds of Python per call); the same summation as numpy's mean/var."""
    op = _FLOAT_UFUNCS.get(name)
    if op is not None:
        return op(flat)
    n = flat.size
    if name == "mean":
        return np.add.reduce(flat) / n if n else flat.dtype.type("nan")
    if name in ("variance", "std"):
        if n < 2:
            return flat.real.dtype.type("nan")
        d = flat - np.add.reduce(flat) / n
        if d.dtype.kind == "c":
            d = np.absolute(d)
        var = np.add.reduce(d * d) / (n - 1)
        return np.sqrt(var) if name == "std" else var
    mag = np.absolute(flat)
    if name == "l1":
        return np.add.reduce(mag)
    return np.sqrt(np.dot(mag, mag)) if n else np.add.reduce(mag)


def _int_reduction(name: str, flat: np.ndarray) -> np.generic:
    if name in ("min", "max", "sum", "prod"):
        return getattr(flat, name)()
    # mean, variance, std and norms in float64: no overflow (abs(-128), squares)
    return _float_reduction(name, flat.astype(np.float64))


def _count(name: str, flat: np.ndarray) -> np.int64:
    if name == "num_zero":
        return np.int64(np.count_nonzero(flat == 0))
    if flat.dtype.kind not in "fc":
        return np.int64(0)  # integers and bools hold neither NaN nor Inf
    test = np.isnan if name == "num_nan" else np.isinf
    return np.int64(np.count_nonzero(test(flat)))


def check_reducible(dtype: np.dtype, reduction: str, is_abs: bool = False,
                    tensor_name: str | None = None) -> None:
    """Raise TensorNotReducible (a TypeError and an SMDebugValueError) for str/bytes/object
    dtypes, naming the tensor, the reduction and the dtype."""
    if dtype.kind in UNREDUCIBLE_KINDS:
        raise TensorNotReducible(tensor_name, reduction, dtype, is_abs)


def compute_reduction(name: str, value: np.ndarray, abs: bool = False,
                      tensor_name: str | None = None) -> np.generic:
    """One reduction of a whole tensor, defined as the PyTorch hook saves it: a numpy scalar
    (shape (), like a saved 0-d reduction) of the input's float dtype; counts are int64.

    Integer means, variances and norms are float64. `tensor_name` only names the tensor in
    errors.
    """
    if name not in _NAMES:
        check_reduction_name(name)
    arr = value if type(value) is np.ndarray else np.asarray(value)
    dt = arr.dtype
    if dt.kind in UNREDUCIBLE_KINDS:
        raise TensorNotReducible(tensor_name, name, dt, bool(abs))
    flat = arr if arr.ndim == 1 else arr.reshape(-1)
    if name in _COUNTS:
        return _count(name, flat)  # the same with or without abs
    if abs:
        flat = np.absolute(flat)
        dt = flat.dtype
    if flat.size == 0 and name in ("min", "max"):
        raise SMDebugValueError(f"reduction {name!r} of an empty tensor is undefined")
    kind = dt.kind
    if kind == "f":
        if dt.itemsize < 4:
            return _float_reduction(name, flat.astype(np.float32)).astype(dt)
        return _float_reduction(name, flat)
    if kind == "c":
        res = _float_reduction(name, flat)
        if name in ("l1", "l2", "variance", "std"):
            res = res.astype(np.finfo(dt).dtype)
        return res
    return _int_reduction(name, flat)


def reduce_array(arr: np.ndarray, reduction: str, is_abs: bool,
                 tensor_name: str | None = None) -> np.ndarray:
    """`compute_reduction` as the 0-d array a hook writes."""
    return np.asarray(compute_reduction(reduction, arr, is_abs, tensor_name))


__all__ = [
    "ALLOWED_NORMS",
    "ALLOWED_REDUCTIONS",
    "ALL_REDUCTIONS",
    "COUNT_REDUCTIONS",
    "REDUCTIONS_PREFIX",
    "UNREDUCIBLE_KINDS",
    "check_reducible",
    "check_reduction_name",
    "compute_reduction",
    "is_count",
    "is_reduction_tensor_name",
    "parse_reduction_tensor_name",
    "reduce_array",
    "reduction_tensor_name",
]
