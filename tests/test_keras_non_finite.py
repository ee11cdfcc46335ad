"""`detect_non_finite=True` on the Keras hook, under Keras 2 (``tf_keras``) and Keras 3, with
real ``fit``/``evaluate`` training that turns non-finite at a known step in a known place: a
layer multiplying by inf (``forward``), a loss returning inf (``loss``), an identity layer whose
gradient is NaN (``backward``), a callback writing inf into a weight (``weights``). The record
read back names the step, the phase, the layer and the tensor, with exact counts."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import numpy as np
import pytest
from lazy_module import lazy, require_module
from legacy_keras import run_legacy_script

from smdebug_lite import modes
from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.trials import create_trial

require_module("tensorflow")
tf = lazy("tensorflow")
smd_tf = lazy("smdebug_lite.tensorflow")
smd_xgb = lazy("smdebug_lite.xgboost", skip=False)

REPO = Path(__file__).resolve().parents[1]
BATCH = 4


pytestmark = pytest.mark.usefixtures("no_current_hook")


def _data(n: int = 40):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, x[:, :2] * 0.5


def _at_call(layer, call: int):
    """A layer's own call counter (a variable the step increments) reaching `call` (from 1)."""
    return tf.equal(layer.calls.assign_add(1.0), float(call))


def _layers(K):
    class Counted(K.layers.Layer):
        """A layer that counts its calls in a variable, to go wrong at its `at`-th."""

        def __init__(self, at: int, **kwargs):
            super().__init__(**kwargs)
            self.at = at

        def build(self, input_shape):
            self.calls = self.add_weight(name="calls", shape=(), initializer="zeros",
                                         trainable=False)

    class Boom(Counted):
        """Multiplies its input by inf at its `at`-th call."""

        def call(self, x):
            return x * tf.where(_at_call(self, self.at), np.inf, 1.0)

    class NanGrad(Counted):
        """Identity whose gradient is NaN at its `at`-th call."""

        def call(self, x):
            bad = _at_call(self, self.at)

            @tf.custom_gradient
            def identity(t):
                return tf.identity(t), lambda dy: dy * tf.where(bad, np.nan, 1.0)

            return identity(x)

    return Boom, NanGrad


def _model(K, boom_at: int | None = None, nan_grad_at: int | None = None, loss="mse"):
    """x -> [boom] -> hidden (linear) -> [nangrad] -> out."""
    Boom, NanGrad = _layers(K)
    K.utils.set_random_seed(0)
    x = K.Input((4,), name="x")
    h = x if boom_at is None else Boom(boom_at, name="boom")(x)
    h = K.layers.Dense(3, name="hidden")(h)
    if nan_grad_at is not None:
        h = NanGrad(nan_grad_at, name="nangrad")(h)
    model = K.Model(x, K.layers.Dense(2, name="out")(h))
    model.compile(K.optimizers.SGD(0.01), loss)
    return model


def _fit(K, model, out: Path, callbacks=(), save_interval: int = 100, **hook_kwargs):
    hook = smd_tf.KerasHook(str(out), save_config=smd_tf.SaveConfig(save_interval=save_interval),
                     detect_non_finite=True, **hook_kwargs)
    x, y = _data()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
              callbacks=[hook, *callbacks])
    hook.close()
    return hook


def _record(out: Path) -> NonFiniteRecord:
    record = create_trial(str(out)).first_non_finite()
    assert record is not None
    return record


def _fields(record: NonFiniteRecord) -> tuple:
    return (record.step, record.mode, record.mode_step, record.worker, record.phase,
            record.module, record.tensor, record.nan, record.posinf, record.neginf)


def _signs(x: np.ndarray) -> tuple[int, int, int]:
    """NaN, +Inf, -Inf counts of ``x * inf``."""
    return int((x == 0).sum()), int((x > 0).sum()), int((x < 0).sum())


def test_forward_non_finite_is_recorded_at_its_layer(tmp_path, K, caplog):
    """The first non-finite tensor is the multiplying layer's output at its third call (step
    2); everything after it (the next layers, the loss, the gradients) is not named."""
    caplog.set_level(logging.WARNING, logger="smdebug_lite")
    out = tmp_path / "run"
    _fit(K, _model(K, boom_at=3), out)
    x, _ = _data()
    record = _record(out)
    assert _fields(record) == (2, "TRAIN", 2, "worker_0", "forward", "boom", "boom/outputs",
                               *_signs(x[2 * BATCH:3 * BATCH]))
    warnings = [r.getMessage() for r in caplog.records if "non-finite" in r.getMessage()]
    assert len(warnings) == 1 and "forward in boom, tensor boom/outputs" in warnings[0]
    assert not [r for r in caplog.records if "is ignored" in r.getMessage()]


@pytest.mark.slow
def test_a_finite_run_writes_no_record(tmp_path, K):
    out = tmp_path / "run"
    hook = _fit(K, _model(K), out, save_interval=3)
    assert hook.step == 9
    trial = create_trial(str(out))
    assert trial.first_non_finite() is None
    assert trial.non_finite_records() == []
    assert not (out / "non_finite").exists()
    assert trial.steps(mode=modes.TRAIN) == [0, 3, 6, 9]  # (the schedule, unchanged)


@pytest.mark.slow
def test_loss_non_finite_is_recorded_as_the_loss(tmp_path, K):
    """Finite predictions, a loss that is +inf at its fifth call (step 4)."""
    counter = tf.Variable(0.0, trainable=False)

    def loss(y_true, y_pred):
        scale = tf.where(tf.equal(counter.assign_add(1.0), 5.0), np.inf, 1.0)
        return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1) * scale

    out = tmp_path / "run"
    _fit(K, _model(K, loss=loss), out)
    assert _fields(_record(out)) == (4, "TRAIN", 4, "worker_0", "loss", "", "loss", 0, 1, 0)


@pytest.mark.slow
def test_backward_non_finite_is_recorded_at_the_first_gradient_the_optimizer_gets(tmp_path, K):
    """A NaN gradient at step 6 flows into the hidden layer's gradients; its kernel's is the
    first the optimizer receives. The step saves gradients (save_interval=1): the instrumented
    step checks too, and the step's tensors are saved by the schedule."""
    out = tmp_path / "run"
    _fit(K, _model(K, nan_grad_at=7), out, save_interval=1, include_collections=["gradients"])
    assert _fields(_record(out)) == (6, "TRAIN", 6, "worker_0", "backward", "hidden",
                                     "gradients/hidden/kernelGrad", 12, 0, 0)
    trial = create_trial(str(out))
    assert np.isnan(trial.tensor("gradients/hidden/kernelGrad").value(6)).all()
    assert np.isfinite(trial.tensor("gradients/out/kernelGrad").value(6)).all()


@pytest.mark.slow
def test_weights_non_finite_is_recorded_at_the_step_that_wrote_it(tmp_path, K):
    """A callback writes inf into one weight after batch 3: the next step finds it as the
    step starts, before its forward pass, and the record names the step after which it was
    written."""

    class Poison(K.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:
                kernel = self.model.get_layer("out").kernel
                kernel.assign(tf.tensor_scatter_nd_update(
                    tf.convert_to_tensor(kernel), [[1, 0]], [-np.inf]))

    out = tmp_path / "run"
    _fit(K, _model(K), out, callbacks=[Poison()])
    assert _fields(_record(out)) == (3, "TRAIN", 3, "worker_0", "weights", "out",
                                     "out/kernel:0", 0, 0, 1)


@pytest.mark.slow
def test_the_last_update_of_a_fit_is_checked_when_it_ends(tmp_path, K):
    """No step runs after the last one to find what its update (here, a callback after it)
    wrote: the hook checks the weights when the training loop ends."""

    class Poison(K.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 9:
                self.model.get_layer("hidden").bias.assign([0.0, np.nan, 0.0])

    out = tmp_path / "run"
    _fit(K, _model(K), out, callbacks=[Poison()])
    assert _fields(_record(out)) == (9, "TRAIN", 9, "worker_0", "weights", "hidden",
                                     "hidden/bias:0", 1, 0, 0)


@pytest.mark.slow
def test_evaluate_and_predict_are_checked_in_their_modes(tmp_path, K):
    x, y = _data()
    out = tmp_path / "eval"
    hook = smd_tf.KerasHook(str(out), detect_non_finite=True)
    _model(K, boom_at=2).evaluate(x, y, batch_size=8, verbose=0, callbacks=[hook])
    hook.close()
    assert _fields(_record(out)) == (1, "EVAL", 1, "worker_0", "forward", "boom",
                                     "boom/outputs", *_signs(x[8:16]))
    out = tmp_path / "predict"
    hook = smd_tf.KerasHook(str(out), detect_non_finite=True)
    _model(K, boom_at=3).predict(x, batch_size=8, verbose=0, callbacks=[hook])
    hook.close()
    assert _fields(_record(out)) == (2, "PREDICT", 2, "worker_0", "forward", "boom",
                                     "boom/outputs", *_signs(x[16:24]))


@pytest.mark.slow
def test_hook_from_debug_hook_config_json(tmp_path, K):
    out = tmp_path / "run"
    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"LocalPath": str(out), "HookParameters": {
        "detect_non_finite": "true", "save_interval": "100"}}))
    hook = smd_tf.KerasHook.create_from_json_file(str(config))
    assert hook.arguments.detect_non_finite is True
    x, y = _data()
    _model(K, boom_at=4).fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
                             callbacks=[hook])
    hook.close()
    assert _fields(_record(out))[:7] == (3, "TRAIN", 3, "worker_0", "forward", "boom",
                                         "boom/outputs")


@pytest.mark.slow
def test_a_dynamic_loss_scale_overflowing_on_purpose_is_not_recorded(tmp_path, K):
    """Mixed precision: the loss scale starts at 2**15, the first steps' float16 gradients
    overflow, and the optimizer skips them and lowers the scale, as designed."""
    K.mixed_precision.set_global_policy("mixed_float16")
    try:
        K.utils.set_random_seed(0)
        x_in = K.Input((4,))
        h = K.layers.Dense(8, name="hidden")(x_in)
        model = K.Model(x_in, K.layers.Dense(2, name="out", dtype="float32")(h))
        model.compile(K.mixed_precision.LossScaleOptimizer(K.optimizers.SGD(0.01)), "mse")
    finally:
        K.mixed_precision.set_global_policy("float32")
    x, y = _data()
    out = tmp_path / "run"
    hook = smd_tf.KerasHook(str(out), detect_non_finite=True)
    model.fit(x * 100, y * 100, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    scale = getattr(model.optimizer, "dynamic_scale", None)
    assert float(model.optimizer.loss_scale if scale is None else scale) < 2 ** 15
    assert create_trial(str(out)).first_non_finite() is None


def test_other_hooks_still_warn_that_they_ignore_it(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="smdebug_lite")
    smd_xgb.Hook(str(tmp_path / "xgb"), detect_non_finite=True).close()
    assert any("xgboost hook does not check" in r.getMessage() for r in caplog.records)


LEGACY_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    import tf_keras
    assert tf.keras.Sequential is tf_keras.Sequential, "tf.keras is not Keras 2"
    {setup}
    import smdebug.tensorflow as smd

    class Boom(tf.keras.layers.Layer):
        def build(self, input_shape):
            self.calls = self.add_weight(name="calls", shape=(), initializer="zeros",
                                         trainable=False)

        def call(self, x):
            at = tf.equal(self.calls.assign_add(1.0), 2.0)
            return x * tf.where(at, -np.inf, 1.0)

    with {strategy}.scope():
        m = tf.keras.Sequential([tf.keras.layers.Dense(3, name="hidden", input_shape=(4,)),
                                 Boom(name="boom"), tf.keras.layers.Dense(2, name="out")])
        m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    x = np.ones((24, 4), "float32")
    hook = smd.KerasHook(sys.argv[1], detect_non_finite=True)
    m.fit(x, x[:, :2], batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
""")



@pytest.mark.slow
@pytest.mark.parametrize("mirrored", [False, True], ids=["default", "mirrored"])
def test_unchanged_tf_keras_script_under_legacy_keras(tmp_path, mirrored):
    """``TF_USE_LEGACY_KERAS=1``: ``tf.keras`` is Keras 2, as in an unchanged TF 2.x script;
    under a MirroredStrategy on two logical CPUs the first replica's half batch is checked."""
    pytest.importorskip("tf_keras")
    out = run_legacy_script(LEGACY_SCRIPT, str(tmp_path / "run"), mirrored)
    record = create_trial(out).first_non_finite()
    assert record is not None
    assert (record.step, record.mode, record.phase, record.module, record.tensor) == (
        1, "TRAIN", "forward", "boom", "boom/outputs")
    # the hidden layer's 3 outputs of each sample of the batch (of the replica's half)
    assert record.nan + record.posinf + record.neginf == (6 if mirrored else 12)
