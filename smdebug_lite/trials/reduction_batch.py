"""A reduction computed for many same-shaped float arrays in one numpy call.

A sweep of `Tensor.reduction_value` over a tensor's steps (when the reduction was not saved)
computes one reduction per step: the numpy call is the smaller part of its cost, the Python
around it the larger. Reducing the rows of one stacked array along its last axis runs numpy's
same loop per row as reducing each array alone, so the results equal `compute_reduction`'s bit
for bit; `reduce_rows` checks that on its first row each time and gives up (None) otherwise.
Only reductions whose batched form is that same loop are batched (min, max, sum, mean), and
only small float arrays in native byte order (stacking copies them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smdebug_lite.config.reductions import compute_reduction

_UFUNCS = {"min": np.minimum.reduce, "max": np.maximum.reduce, "sum": np.add.reduce,
           "mean": np.add.reduce}
MAX_SIZE = 4096  # elements per array: larger ones cost more to copy than their call
MIN_ROWS = 16  # fewer arrays than this are reduced one by one


def batchable(reduction: str, arr: np.ndarray) -> bool:
    """Whether `reduce_rows` takes arrays like `arr` for this reduction."""
    dt = arr.dtype
    return (reduction in _UFUNCS and dt.kind == "f" and dt.itemsize >= 4 and dt.isnative
            and 0 < arr.size <= MAX_SIZE and arr.flags.c_contiguous)


def reduce_rows(reduction: str, is_abs: bool, arrays: Sequence[np.ndarray],
                tensor_name: str | None = None) -> list[np.generic] | None:
    """`compute_reduction(reduction, a, is_abs)` for each array (all of one shape and dtype,
    each `batchable`), or None when the batched result differs from it on the first one."""
    first = arrays[0]
    dt, n = first.dtype, first.size
    rows = np.frombuffer(b"".join(arrays), dt).reshape(len(arrays), n)
    if is_abs:
        rows = np.absolute(rows)
    out = _UFUNCS[reduction](rows, axis=1)
    if reduction == "mean":
        out = out / n
    found = list(out)
    alone = compute_reduction(reduction, first, is_abs, tensor_name=tensor_name)
    if type(alone) is not type(found[0]) or alone.tobytes() != found[0].tobytes():
        return None
    return found


def reduce_all(reduction: str, is_abs: bool, values: Sequence[np.ndarray | None],
               tensor_name: str | None = None) -> list[np.generic | None]:
    """Per item of `values`, `compute_reduction`'s result where `reduce_rows` gives it for
    the items of one shape and dtype at once; None elsewhere (computed one by one when
    asked for)."""
    done: list[np.generic | None] = [None] * len(values)
    groups: dict[tuple[tuple[int, ...], str], list[int]] = {}
    for i, v in enumerate(values):
        if v is not None:
            groups.setdefault((v.shape, v.dtype.str), []).append(i)
    for at in groups.values():
        first = values[at[0]]
        if len(at) < MIN_ROWS or not batchable(reduction, first):  # type: ignore[arg-type]
            continue
        found = reduce_rows(reduction, is_abs, [values[i] for i in at],  # type: ignore[misc]
                            tensor_name)
        if found is not None:
            for i, value in zip(at, found, strict=True):
                done[i] = value
    return done
