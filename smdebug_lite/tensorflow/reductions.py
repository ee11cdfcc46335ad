"""Reductions computed with TensorFlow ops where the tensor lives (GPU tensors stay on the GPU;
only the scalar results are copied to the host, in one transfer per tensor).

Semantics are those of every smdebug-lite hook (`smdebug_lite.config.reductions`): variance and std
are unbiased (ddof=1, as torch computes them), l1/l2 norms are over the flattened tensor, the
mean of an integer tensor is float64, the counts (num_nan, num_inf, num_zero) are int64.
smdebug's TF hook computed them with numpy instead (ddof=0, and 2-D "norms" were matrix norms),
which disagreed with its own PyTorch hook.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from smdebug_lite.config.reductions import check_reduction_name, is_count, reduce_array
from smdebug_lite.exceptions import TensorNotReducible

_FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


def _one(flat: tf.Tensor, reduction: str) -> tf.Tensor:
    if reduction == "min":
        return tf.reduce_min(flat)
    if reduction == "max":
        return tf.reduce_max(flat)
    if reduction == "mean":
        return tf.reduce_mean(flat)
    if reduction == "sum":
        return tf.reduce_sum(flat)
    if reduction == "prod":
        return tf.reduce_prod(flat)
    if reduction in ("variance", "std"):
        n = tf.cast(tf.size(flat), flat.dtype)
        var = tf.math.reduce_variance(flat) * n / (n - 1.0)  # n == 1 gives nan, as torch does
        return var if reduction == "variance" else tf.sqrt(var)
    if reduction == "l1":
        return tf.reduce_sum(tf.abs(flat))
    if reduction == "l2":
        return tf.sqrt(tf.reduce_sum(tf.square(flat)))
    raise ValueError(f"reduction={reduction!r} is not supported")


def tf_reductions(
    tensor: tf.Tensor, pairs: list[tuple[str, bool]], tensor_name: str | None = None
) -> dict[tuple[str, bool], np.ndarray]:
    """{(reduction, abs): 0-d array} for a float tensor; other dtypes go through numpy.

    A string tensor raises TensorNotReducible (a TypeError and an SMDebugValueError) naming
    `tensor_name`, the reduction and the dtype.
    """
    if not pairs:
        return {}
    if tensor.dtype not in _FLOATS:
        if tensor.dtype == tf.string:
            reduction, is_abs = pairs[0]
            raise TensorNotReducible(tensor_name, reduction, tensor.dtype.name, is_abs)
        arr = tensor.numpy()
        return {pair: reduce_array(arr, *pair, tensor_name=tensor_name) for pair in pairs}
    dtype = tensor.dtype
    # Half types accumulate in float32 (TF's own reductions would overflow or lose precision).
    x = tf.cast(tensor, tf.float32) if dtype in (tf.float16, tf.bfloat16) else tensor
    flat = tf.reshape(x, [-1])
    absolute = None
    values, counts = [], []
    for reduction, is_abs in pairs:
        if is_count(reduction):
            counts.append(_count(flat, reduction))
        elif is_abs:
            if absolute is None:
                absolute = tf.abs(flat)
            values.append(_one(absolute, reduction))
        else:
            values.append(_one(flat, reduction))
    # one device-to-host copy per result dtype
    host_values = iter(tf.cast(tf.stack(values), dtype).numpy() if values else ())
    host_counts = iter(tf.stack(counts).numpy() if counts else ())
    return {pair: np.asarray(next(host_counts) if is_count(pair[0]) else next(host_values))
            for pair in pairs}


def _count(flat: tf.Tensor, reduction: str) -> tf.Tensor:
    if reduction == "num_nan":
        hits = tf.math.is_nan(flat)
    elif reduction == "num_inf":
        hits = tf.math.is_inf(flat)
    else:
        hits = tf.equal(flat, 0)
    return tf.math.count_nonzero(hits, dtype=tf.int64)


def get_tensorflow_reduction(
    reduction_name: str, tensor: tf.Tensor, on_absolute_values: bool = False
) -> tf.Tensor:
    """smdebug's ``smdebug.tensorflow.reductions`` entry point: one reduction as a 0-d tensor,
    with the same value the Keras hook saves for it (see the module docstring). An unknown name
    raises SMDebugValueError (an SMDebugError, as smdebug raised) listing the valid ones."""
    check_reduction_name(reduction_name)
    pair = (reduction_name, bool(on_absolute_values))
    return tf.constant(tf_reductions(tf.convert_to_tensor(tensor), [pair])[pair])


__all__ = ["get_tensorflow_reduction", "tf_reductions"]
