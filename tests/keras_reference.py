"""The small Keras test network (Dense 4->3 relu, Dense 3->2, mean squared error) computed without
Keras, and its data: the Keras 2 and Keras 3 hook tests check saved values against it."""

from __future__ import annotations

import numpy as np
from lazy_module import lazy

tf = lazy("tensorflow")


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


def check_fit_layout(trial, weights: list[str], grads: list[str]) -> None:
    """The steps and collections of the network's trial after ``fit`` of 2 epochs x 3 batches
    with 2 validation batches, ``evaluate`` of 2 and ``predict`` of 2, every step saved."""
    from smdebug_lite import modes

    assert trial.steps(mode=modes.TRAIN) == list(range(6))
    assert trial.steps(mode=modes.EVAL) == list(range(6))  # 2 x 2 validation + 2 evaluate
    assert trial.steps(mode=modes.PREDICT) == [0, 1]
    assert set(trial.tensor_names(collection="gradients")) == set(grads)
    assert set(trial.tensor_names(collection="weights")) == {weights[0], weights[2]}
    assert set(trial.tensor_names(collection="biases")) == {weights[1], weights[3]}
    assert set(trial.tensor_names(collection="layers")) == {
        "hidden/inputs", "hidden/outputs", "out/inputs", "out/outputs"}
