"""The small Keras test network (Dense 4->3 relu, Dense 3->2, mean squared error) computed without
Keras, and its data: the Keras 2 and Keras 3 hook tests check saved values against it."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)).astype("float32"), rng.normal(size=(n, 2)).astype("float32")


def reference(weights, xb, yb) -> dict:
    """Forward pass, loss and gradients of the network with `weights` (kernel, bias, kernel,
    bias) on one batch."""
    w1, b1, w2, b2 = (tf.constant(w) for w in weights)
    with tf.GradientTape() as tape:
        tape.watch([w1, b1, w2, b2])
        hidden = tf.nn.relu(xb @ w1 + b1)
        pred = hidden @ w2 + b2
        loss = tf.reduce_mean(tf.square(pred - yb))
    grads = tape.gradient(loss, [w1, b1, w2, b2])
    return {"hidden": hidden.numpy(), "pred": pred.numpy(), "loss": float(loss),
            "grads": [g.numpy() for g in grads]}
