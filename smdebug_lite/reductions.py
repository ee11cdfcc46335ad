"""Reductions computed by the reader when only the raw tensor was saved, and reduction names.

Saved reductions come from the hooks (PyTorch computes them with torch: unbiased variance and
std, norms of the flattened tensor). smdebug's reader computed missing ones with numpy defaults
instead (ddof=0, matrix norms for 2-D, ValueError for 0-d and >= 3-D), so the same query gave
different numbers depending on whether the reduction had been saved. Here the on-the-fly values
follow the hooks' definitions, so both paths agree.

Reduction tensors are stored as ``smdebug/reductions/[abs_]<name>/<tensor>``.
"""

from __future__ import annotations

import numpy as np

from smdebug_lite.exceptions import SMDebugValueError, TensorNotReducible

REDUCTIONS_PREFIX = "smdebug/reductions/"
ALLOWED_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod")
ALLOWED_NORMS = ("l1", "l2")
ALL_REDUCTIONS = ALLOWED_REDUCTIONS + ALLOWED_NORMS


def reduction_tensor_name(tensor_name: str, reduction: str, abs: bool = False) -> str:
    """Name under which a hook stores a reduction of `tensor_name`."""
    return f"{REDUCTIONS_PREFIX}{'abs_' if abs else ''}{reduction}/{tensor_name}"


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
    if name not in ALL_REDUCTIONS:
        raise SMDebugValueError(
            f"Invalid reduction type {name!r}; expected one of {', '.join(ALL_REDUCTIONS)}"
        )
    return name


_FLOAT_UFUNCS = {
    "min": np.minimum.reduce,
    "max": np.maximum.reduce,
    "sum": np.add.reduce,
    "prod": np.multiply.reduce,
}
_NAMES = frozenset(ALL_REDUCTIONS)
# dtype kinds with no arithmetic: str, bytes, object, structured.
UNREDUCIBLE_KINDS = frozenset("USOV")


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


def check_reducible(dtype: np.dtype, reduction: str, is_abs: bool = False,
                    tensor_name: str | None = None) -> None:
    """Raise TensorNotReducible (a TypeError and an SMDebugValueError) for str/bytes/object
    dtypes, naming the tensor, the reduction and the dtype."""
    if dtype.kind in UNREDUCIBLE_KINDS:
        raise TensorNotReducible(tensor_name, reduction, dtype, is_abs)


def compute_reduction(name: str, value: np.ndarray, abs: bool = False,
                      tensor_name: str | None = None) -> np.generic:
    """One reduction of a whole tensor, defined as the PyTorch hook saves it: a numpy scalar
    (shape (), like a saved 0-d reduction) of the input's float dtype.

    variance/std are unbiased (ddof=1; NaN for fewer than two elements, as in torch), l1/l2 are
    norms of the flattened tensor. Half precision is accumulated in float32, as torch does;
    wider floats natively (numpy's pairwise summation, which smdebug's reader also used).
    `tensor_name` only names the tensor in errors.
    """
    if name not in _NAMES:
        check_reduction_name(name)
    arr = value if type(value) is np.ndarray else np.asarray(value)
    dt = arr.dtype
    if dt.kind in UNREDUCIBLE_KINDS:
        raise TensorNotReducible(tensor_name, name, dt, bool(abs))
    if abs:
        arr = np.absolute(arr)
        dt = arr.dtype
    if arr.size == 0 and name in ("min", "max"):
        raise SMDebugValueError(f"reduction {name!r} of an empty tensor is undefined")
    flat = arr if arr.ndim == 1 else arr.reshape(-1)
    kind = dt.kind
    if kind == "f":
        if dt.itemsize < 4:
            res = _float_reduction(name, flat.astype(np.float32)).astype(dt)
        else:
            res = _float_reduction(name, flat)
    elif kind == "c":
        res = _float_reduction(name, flat)
        if name in ("l1", "l2", "variance", "std"):
            res = res.astype(np.finfo(dt).dtype)
    else:
        res = _int_reduction(name, flat)
    return res
