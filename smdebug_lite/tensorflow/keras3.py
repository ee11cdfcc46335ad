"""Keras 3 (``keras``, what ``tf.keras`` is on TensorFlow 2.16+) for the Keras hook."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf


class Keras3:
    """Optimizers apply gradients in ``apply(grads, trainable_variables)`` (which
    ``apply_gradients`` calls); a ``LossScaleOptimizer`` gets the gradients still scaled by its
    ``dynamic_scale``."""

    early_step_functions: tuple[str, ...] = ()
    trainer_module = "keras.src.backend.tensorflow.trainer"
    name = "keras3"

    def patch_optimizer(self, optimizer: Any, on_apply: Callable[..., None]) -> bool:
        if optimizer is None or "_smd_original_apply" in optimizer.__dict__:
            return False
        original = optimizer.apply

        @functools.wraps(original)
        def apply(grads, trainable_variables=None, *args, **kwargs):
            variables = trainable_variables
            if variables is None:
                variables = getattr(optimizer, "_trainable_variables", None)
            on_apply(optimizer, grads, variables)
            return original(grads, trainable_variables, *args, **kwargs)

        object.__setattr__(optimizer, "_smd_original_apply", original)
        object.__setattr__(optimizer, "apply", apply)
        return True

    def unpatch_optimizer(self, optimizer: Any) -> None:
        if optimizer is not None and "_smd_original_apply" in optimizer.__dict__:
            optimizer.__dict__.pop("apply", None)
            optimizer.__dict__.pop("_smd_original_apply", None)

    def optimizer_variables(self, optimizer: Any) -> list:
        """The iteration count and the learning rate when it is a variable, the optimizer
        state smdebug saved for ``tf.keras`` (and what a Keras 2 optimizer gives): not the
        per-weight slots (``adam/dense_bias_momentum:0``), which would also fall in ``biases``
        by its regex and add two copies of the weights to every saved step."""
        held = (getattr(optimizer, "iterations", None), getattr(optimizer, "learning_rate", None))
        return [v for v in held if self.is_variable(v)]

    def unscaled_gradient(self, optimizer: Any, grad: Any) -> Any:
        scale = getattr(optimizer, "dynamic_scale", None)
        if scale is not None and isinstance(grad, tf.Tensor):
            return grad / tf.cast(scale, grad.dtype)
        return grad

    def unpack_data(self, data: Any) -> tuple[Any, Any, Any]:
        return keras.utils.unpack_x_y_sample_weight(data)

    def is_variable(self, value: Any) -> bool:
        return isinstance(value, (tf.Variable, keras.Variable))

    def is_rng_state(self, variable: Any) -> bool:
        path = str(getattr(variable, "path", None) or getattr(variable, "name", ""))
        return path.rsplit("/", 1)[-1].split(":", 1)[0] == "seed_generator_state"


KERAS3 = Keras3()

__all__ = ["KERAS3", "Keras3"]
