"""Tensor names the Keras hook writes, in one place (see docs/tensorflow.md).

They follow smdebug's TF2 Keras hook: variables keep TensorFlow's graph name with its ``:0``
suffix, gradients are ``gradients/<variable>Grad``, layer tensors ``<layer>/inputs`` and
``<layer>/outputs`` (``_<i>`` appended when a layer takes or returns several tensors), model
inputs/labels/predictions ``inputs``/``labels``/``predictions``, losses and metrics by their Keras
log keys.
"""

from __future__ import annotations

import re
from typing import Any

from smdebug_lite.config.collection import CollectionKeys

GRADIENT_PREFIX = "gradients/"
GRADIENT_SUFFIX = "Grad"
_SUFFIX = re.compile(r":\d+$")


def variable_base_name(variable) -> str:
    """A variable's path without the ``:0`` suffix (Keras 3 ``path``, else TF ``name``)."""
    path = getattr(variable, "path", None)
    if isinstance(path, str) and path:
        return _SUFFIX.sub("", path)
    name = getattr(variable, "name", None)
    if isinstance(name, bytes):
        name = name.decode("utf-8")
    return _SUFFIX.sub("", str(name))


def variable_name(variable) -> str:
    """Name a variable's value is saved under, e.g. ``sequential/dense/kernel:0``."""
    return variable_base_name(variable) + ":0"


def gradient_name(variable) -> str:
    """Name of a variable's gradient, e.g. ``gradients/sequential/dense/kernelGrad``."""
    return f"{GRADIENT_PREFIX}{variable_base_name(variable)}{GRADIENT_SUFFIX}"


def indexed_names(prefix: str, count: int) -> list[str]:
    """One tensor keeps the bare prefix; several get ``_0``, ``_1``, ..."""
    if count == 1:
        return [prefix]
    return [f"{prefix}_{i}" for i in range(count)]


def structure_names(prefix: str, value: Any, count: int) -> list[str]:
    """Names of the `count` tensors of a step's inputs, labels or predictions, as smdebug named
    them: a dict or list gets ``_0``, ``_1``, ... even for one tensor; anything else as
    `indexed_names`."""
    if isinstance(value, (dict, list)):
        return [f"{prefix}_{i}" for i in range(count)]
    return indexed_names(prefix, count)


def layer_tensor_prefix(layer_name: str, kind: str) -> str:
    """``<layer>/inputs`` or ``<layer>/outputs``."""
    return f"{layer_name}/{kind}s"


def log_key_collection(key: str) -> str:
    """Keras log keys: ``loss`` and ``*_loss`` (``val_loss``, per-output losses) are losses,
    every other key is a metric."""
    if key == "loss" or key.endswith("_loss"):
        return CollectionKeys.LOSSES
    return CollectionKeys.METRICS


__all__ = [
    "GRADIENT_PREFIX",
    "gradient_name",
    "indexed_names",
    "layer_tensor_prefix",
    "log_key_collection",
    "variable_base_name",
    "variable_name",
]
