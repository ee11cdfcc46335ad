"""Keras 2 (the ``tf_keras`` package, ``tf.keras`` under ``TF_USE_LEGACY_KERAS=1``) for the Keras
hook: its optimizers and its callback protocol."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import tensorflow as tf


class Keras2:
    """Optimizers (``tf_keras.optimizers.*`` and ``.legacy.*``) apply ``(gradient, variable)``
    pairs in ``apply_gradients``; a ``LossScaleOptimizer`` unscales them before that, so they
    arrive as the inner optimizer applies them."""

    # Keras 2's evaluate takes its step function before calling any callback.
    early_step_functions: tuple[str, ...] = ("test",)
    trainer_module = "tf_keras.src.engine.training"
    name = "keras2"

    def patch_optimizer(self, optimizer: Any, on_apply: Callable[..., None]) -> bool:
        if optimizer is None or "_smd_original_apply_gradients" in optimizer.__dict__:
            return False
        original = optimizer.apply_gradients

        @functools.wraps(original)
        def apply_gradients(grads_and_vars, *args, **kwargs):
            pairs = list(grads_and_vars)
            on_apply(optimizer, [g for g, _ in pairs], [v for _, v in pairs])
            return original(pairs, *args, **kwargs)

        object.__setattr__(optimizer, "_smd_original_apply_gradients", original)
        object.__setattr__(optimizer, "apply_gradients", apply_gradients)
        return True

    def unpatch_optimizer(self, optimizer: Any) -> None:
        if optimizer is not None and "_smd_original_apply_gradients" in optimizer.__dict__:
            optimizer.__dict__.pop("apply_gradients", None)
            optimizer.__dict__.pop("_smd_original_apply_gradients", None)

    def optimizer_variables(self, optimizer: Any) -> list:
        """The optimizer's iteration count and the hyperparameters it holds as variables, the
        set smdebug 1.0.34 saved for ``tf.keras`` optimizers (not the per-weight slots, whose
        names such as ``Adam/m/dense/bias:0`` would also fall in the ``biases`` collection).
        A legacy optimizer (``Adam/iter:0``, ``Adam/beta_1:0``, ``Adam/learning_rate:0``...)
        makes them at its first update; a current one holds ``iteration:0`` and, unless it
        follows a schedule, ``learning_rate:0`` from the start."""
        if hasattr(optimizer, "_hyper") and hasattr(optimizer, "_iterations"):  # legacy
            made = [v for v in optimizer._hyper.values() if isinstance(v, tf.Variable)]
            iterations = optimizer._iterations
        else:
            rate = getattr(optimizer, "learning_rate", None)
            made = [rate] if isinstance(rate, tf.Variable) else []
            iterations = getattr(optimizer, "iterations", None)
        return ([iterations] if isinstance(iterations, tf.Variable) else []) + made

    def unscaled_gradient(self, optimizer: Any, grad: Any) -> Any:
        return grad

    def unpack_data(self, data: Any) -> tuple[Any, Any, Any]:
        import tf_keras

        return tf_keras.utils.unpack_x_y_sample_weight(data)

    def is_variable(self, value: Any) -> bool:
        return isinstance(value, tf.Variable)

    def is_rng_state(self, variable: Any) -> bool:
        return False  # (Keras 2 layers draw random numbers without variables)


KERAS2 = Keras2()


class Keras2CallbackProtocol:
    """What ``tf_keras``' ``CallbackList`` asks of a callback beyond Keras 3's ``Callback``.

    The hook implements batch-begin methods only; Keras 2 calls a callback's batch methods when
    it implements either end. Batch logs may stay TF tensors: the hook reads a step's logs from
    the step function's outputs, so Keras need not convert them for it every batch."""

    _supports_tf_logs = True
    _chief_worker_only = None

    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return True

    def _implements_predict_batch_hooks(self) -> bool:
        return True


__all__ = ["KERAS2", "Keras2", "Keras2CallbackProtocol"]
