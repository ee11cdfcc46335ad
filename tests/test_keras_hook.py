"""KerasHook on real TensorFlow 2 / Keras 3: fit (with validation), evaluate, predict, custom
GradientTape loops; values checked against computations done independently here."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from keras_reference import check_fit_layout, data, reference
from lazy_module import lazy, loaded, require_module

from smdebug_lite import modes
from smdebug_lite.trials import create_trial

require_module("tensorflow", "keras")
tf = lazy("tensorflow")
keras = lazy("keras")
smd_tf = lazy("smdebug_lite.tensorflow")
keras_hook_module = lazy("smdebug_lite.tensorflow.keras_hook")

LR = 0.1
BATCH = 4


def make_model(seed: int = 0, optimizer=None):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(3, activation="relu", name="hidden"),
        keras.layers.Dense(2, name="out"),
    ], name="net")
    model.compile(optimizer or keras.optimizers.SGD(LR), "mse", metrics=["mae"])
    return model


WEIGHTS = ["net/hidden/kernel:0", "net/hidden/bias:0", "net/out/kernel:0", "net/out/bias:0"]
GRADS = ["gradients/net/hidden/kernelGrad", "gradients/net/hidden/biasGrad",
         "gradients/net/out/kernelGrad", "gradients/net/out/biasGrad"]


def _log_recorder():
    """A callback keeping the logs Keras hands it; built here because its base class comes
    from Keras, imported on first use."""

    class LogRecorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.train, self.test, self.epochs = [], [], []

        def on_train_batch_end(self, batch, logs=None):
            self.train.append(dict(logs))

        def on_test_batch_end(self, batch, logs=None):
            self.test.append(dict(logs))

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append(dict(logs))

    return LogRecorder()


pytestmark = pytest.mark.usefixtures("no_current_hook")


def test_fit_evaluate_predict_match_independent_values(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="smdebug_lite")
    x, y = data(12, 1)
    xv, yv = data(8, 2)
    model = make_model()
    hook = smd_tf.KerasHook(str(tmp_path / "run"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "layers", "outputs"])
    rec = _log_recorder()
    history = model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                        validation_data=(xv, yv), callbacks=[hook, rec])
    model.evaluate(xv, yv, batch_size=BATCH, verbose=0, callbacks=[hook])
    predicted = model.predict(xv, batch_size=BATCH, verbose=0, callbacks=[hook])
    hook.close()
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    # The model is left exactly as Keras built it.
    assert not getattr(model.train_function, "_smd_runner", False)
    assert "train_step" not in model.__dict__ and "call" not in model.layers[0].__dict__
    assert "apply" not in model.optimizer.__dict__

    trial = create_trial(str(tmp_path / "run"))
    check_fit_layout(trial, WEIGHTS, GRADS)

    def at(name, step, mode):
        return trial.tensor(name).value(step, mode=mode)

    for k in range(6):
        xb, yb = x[(k % 3) * BATCH:(k % 3 + 1) * BATCH], y[(k % 3) * BATCH:(k % 3 + 1) * BATCH]
        weights = [at(w, k, modes.TRAIN) for w in WEIGHTS]
        ref = reference(weights, xb, yb)
        for name, expected in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(at(name, k, modes.TRAIN), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(at("hidden/inputs", k, modes.TRAIN), xb)
        np.testing.assert_allclose(at("hidden/outputs", k, modes.TRAIN), ref["hidden"], atol=1e-6)
        np.testing.assert_allclose(at("out/outputs", k, modes.TRAIN), ref["pred"], atol=1e-5)
        np.testing.assert_allclose(at("predictions", k, modes.TRAIN), ref["pred"], atol=1e-5)
        np.testing.assert_allclose(at("labels", k, modes.TRAIN), yb)
        np.testing.assert_allclose(at("loss", k, modes.TRAIN), [rec.train[k]["loss"]])
        np.testing.assert_allclose(at("mae", k, modes.TRAIN), [rec.train[k]["mae"]])
        if k < 5:  # weights are saved before each step: SGD moved them by -lr * gradient
            for w, g in zip(WEIGHTS, GRADS, strict=True):
                np.testing.assert_allclose(at(w, k + 1, modes.TRAIN),
                                           at(w, k, modes.TRAIN) - LR * at(g, k, modes.TRAIN),
                                           rtol=1e-5, atol=1e-6)

    for k in range(6):  # validation batches (and evaluate) are EVAL steps with layer tensors
        xb = xv[(k % 2) * BATCH:(k % 2 + 1) * BATCH]
        weights = [at(w, k, modes.EVAL) for w in WEIGHTS]
        ref = reference(weights, xb, yv[(k % 2) * BATCH:(k % 2 + 1) * BATCH])
        np.testing.assert_allclose(at("hidden/outputs", k, modes.EVAL), ref["hidden"], atol=1e-6)
        assert trial.tensor(GRADS[0]).steps(mode=modes.EVAL) == []
        if k < 4:
            np.testing.assert_allclose(at("loss", k, modes.EVAL), [rec.test[k]["loss"]])
    # Epoch-level validation results go into the last validation step of each epoch.
    assert trial.tensor("val_loss").steps(mode=modes.EVAL) == [1, 3]
    np.testing.assert_allclose(
        [at("val_loss", s, modes.EVAL)[0] for s in (1, 3)], history.history["val_loss"])
    assert "val_loss" in trial.tensor_names(collection="losses")
    assert "val_mae" in trial.tensor_names(collection="metrics")
    np.testing.assert_allclose(
        np.concatenate([at("predictions", s, modes.PREDICT) for s in (0, 1)]), predicted,
        atol=1e-6)


def test_json_config_interval_reductions_and_custom_collection(tmp_path):
    config = {
        "LocalPath": str(tmp_path / "run"),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [
            {"CollectionName": "gradients",
             "CollectionParameters": {"reductions": "mean,max,variance,std,l1_norm,l2_norm,abs_min"}},
            {"CollectionName": "raw_grads", "CollectionParameters": {"include_regex": "^gradients/"}},
            {"CollectionName": "weights", "CollectionParameters": {"reductions": "mean"}},
            {"CollectionName": "hidden_layer",
             "CollectionParameters": {"include_regex": "hidden/outputs", "save_interval": "3"}},
        ],
    }
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(config))
    hook = smd_tf.get_hook("keras", json_config_path=str(path), create_if_not_exists=True)
    assert isinstance(hook, smd_tf.KerasHook) and smd_tf.get_hook() is hook
    x, y = data(24, 3)
    model = make_model(1)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[hook])
    hook.close()

    trial = create_trial(config["LocalPath"])
    grad = trial.tensor(GRADS[0])
    assert grad.steps() == [0, 2, 4]
    assert trial.tensor("hidden/outputs").steps() == [0, 3]
    assert "out/outputs" not in trial.tensor_names()
    # losses follow the hook interval, and the epoch's last step gets the epoch's logs
    assert trial.tensor("loss").steps() == [0, 2, 4, 5]
    raw = grad.value(2).astype(np.float64)
    expected = {"mean": raw.mean(), "max": raw.max(), "variance": raw.var(ddof=1),
                "std": raw.std(ddof=1), "l1": np.abs(raw).sum(),
                "l2": np.sqrt((raw ** 2).sum())}
    for red, value in expected.items():
        np.testing.assert_allclose(grad.reduction_value(2, red), value, rtol=1e-5)
    np.testing.assert_allclose(grad.reduction_value(2, "min", abs=True), np.abs(raw).min(),
                               rtol=1e-6)
    index = json.loads(next((tmp_path / "run" / "index").glob("*/000000000002_*.json")).read_text())
    names = {t["tensorname"] for t in index["tensor_payload"]}
    assert f"smdebug/reductions/variance/{GRADS[0]}" in names
    assert f"smdebug/reductions/abs_min/{GRADS[0]}" in names
    assert f"smdebug/reductions/l2/{GRADS[0]}" in names
    assert f"smdebug/reductions/mean/{WEIGHTS[0]}" in names  # TF names keep their :0
    assert WEIGHTS[0] not in names  # a reduction-only collection saves no raw tensor


def test_gradient_tape_loop(tmp_path):
    x, y = data(12, 4)
    model = make_model(2)
    optimizer = keras.optimizers.SGD(LR)
    hook = smd_tf.KerasHook(str(tmp_path / "tape"), save_config=smd_tf.SaveConfig(save_interval=2),
                     include_collections=["weights", "biases", "gradients", "layers", "inputs"])
    hook.register_model(model)
    expected = {}
    for step in range(3):
        xb, yb = x[step * BATCH:(step + 1) * BATCH], y[step * BATCH:(step + 1) * BATCH]
        before = [v.numpy() for v in model.trainable_variables]
        with hook.wrap_tape(tf.GradientTape()) as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        hook.save_scalar("lr", LR)
        expected[step] = (before, reference(before, xb, yb), float(loss))
    hook.close()
    assert isinstance(tape, tf.GradientTape)

    trial = create_trial(str(tmp_path / "tape"))
    assert trial.steps() == [0, 1, 2]  # 1 holds only the scalar
    assert trial.steps(mode=modes.TRAIN) == [0, 1, 2]
    for step in (0, 2):
        before, ref, loss = expected[step]
        for name, w in zip(WEIGHTS, before, strict=True):
            np.testing.assert_array_equal(trial.tensor(name).value(step), w)
        for name, g in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(trial.tensor(name).value(step), g, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(trial.tensor("hidden/outputs").value(step), ref["hidden"],
                                   atol=1e-6)
        np.testing.assert_allclose(trial.tensor("loss").value(step), loss, rtol=1e-6)
        # the registered model's own input, from its eager call
        np.testing.assert_array_equal(trial.tensor("inputs").value(step),
                                      x[step * BATCH:(step + 1) * BATCH])
    np.testing.assert_allclose(trial.tensor("scalar/lr").value(1), [LR])


def test_registered_objects_stay_patched_when_loops_end_until_close(tmp_path):
    """fit patches its model for its loops only; what a custom loop registered stays patched
    across them, until the hook is closed."""
    x, y = data(8, 9)
    model = make_model(9)
    custom = keras.optimizers.SGD(LR)
    hook = smd_tf.KerasHook(str(tmp_path / "kept"), save_config=smd_tf.SaveConfig(save_interval=1),
                            include_collections=["gradients", "layers"])
    hook.register_model(model)
    hook.wrap_optimizer(custom)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    assert not getattr(model.train_function, "_smd_runner", False)
    assert "train_step" not in model.__dict__
    assert "apply" not in model.optimizer.__dict__  # patched for fit's loop only
    assert all("call" in layer.__dict__ for layer in [model, *model.layers])
    assert "apply" in custom.__dict__
    hook.close()
    assert not any("call" in layer.__dict__ for layer in [model, *model.layers])
    assert "apply" not in custom.__dict__
    assert set(create_trial(str(tmp_path / "kept")).tensor_names(collection="gradients")) == set(GRADS)


def test_save_gradients_from_a_compiled_step(tmp_path):
    x, y = data(8, 5)
    model = make_model(3)
    optimizer = keras.optimizers.SGD(LR)
    hook = smd_tf.KerasHook(str(tmp_path / "fn"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["gradients"])

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss, grads

    saved = []
    for step in range(2):
        hook.set_mode(modes.TRAIN)
        hook.start_step()
        loss, grads = train_step(x[step * BATCH:(step + 1) * BATCH], y[step * BATCH:(step + 1) * BATCH])
        hook.save_gradients(grads, model.trainable_variables)
        hook.save_tensor("my_loss", loss, "custom")
        saved.append([g.numpy() for g in grads])
    hook.close()
    trial = create_trial(str(tmp_path / "fn"))
    for step in range(2):
        for name, g in zip(GRADS, saved[step], strict=True):
            np.testing.assert_array_equal(trial.tensor(name).value(step), g)
    assert trial.tensor("my_loss").steps() == [0, 1]


def test_hook_failure_never_stops_training(tmp_path, caplog, monkeypatch):
    x, y = data(12, 6)
    model = make_model(4)
    hook = smd_tf.KerasHook(str(tmp_path / "broken"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["gradients", "layers"])

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    # an internal error in the middle of the first saved step (its first tensor)
    monkeypatch.setattr(loaded(keras_hook_module), "tf_reductions", broken)
    with caplog.at_level(logging.ERROR):
        history = model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[hook])
    assert len(history.history["loss"]) == 2
    assert hook.disabled
    assert any("boom" in r.getMessage() for r in caplog.records)
    assert not getattr(model.train_function, "_smd_runner", False)
    assert "train_step" not in model.__dict__ and "call" not in model.layers[0].__dict__
    hook.close()


def test_s3_out_dir(s3_bucket, s3_endpoint):
    out = f"s3://{s3_bucket}/jobs/keras"
    x, y = data(12, 10)
    model = make_model(8)
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=2),
                     include_collections=["weights", "gradients", "losses"])
    rec = _log_recorder()
    kernels = []
    begin = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs: kernels.append(model.layers[0].kernel.numpy()))
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
              callbacks=[hook, rec, begin])
    hook.close()  # waits for the uploads
    trial = create_trial(out)
    assert trial.steps(mode=modes.TRAIN) == [0, 2, 4, 5]  # (5: the epoch's logs)
    for step in (0, 2, 4):
        np.testing.assert_array_equal(trial.tensor(WEIGHTS[0]).value(step), kernels[step])
        np.testing.assert_allclose(trial.tensor("loss").value(step), [rec.train[step]["loss"]])
    assert set(trial.tensor_names(collection="gradients")) == set(GRADS)


def test_default_configuration_saves_losses_and_metrics_only(tmp_path):
    x, y = data(8, 7)
    model = make_model(5, optimizer=keras.optimizers.Adam(0.01))
    hook = smd_tf.KerasHook(str(tmp_path / "default"), save_config=smd_tf.SaveConfig(save_interval=1),
                     reduction_config=smd_tf.ReductionConfig(reductions=["mean"], save_raw_tensor=True))
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path / "default"))
    # Keras' batch index is a metric in every step's logs, as smdebug saved it.
    assert set(trial.tensor_names()) == {"loss", "mae", "batch"}
    assert trial.tensor("loss").steps() == [0, 1]
    assert [trial.tensor("batch").value(s)[0] for s in (0, 1)] == [0, 1]
    assert "train_step" not in model.__dict__  # nothing to capture: Keras' own step ran
    # No batch-end methods: where Keras dispatches batch ends asynchronously, it still may.
    from keras.src.utils.python_utils import is_default

    for method in ("on_batch_end", "on_train_batch_end", "on_test_batch_end",
                   "on_predict_batch_end"):
        assert is_default(getattr(hook, method)), method


def test_fit_that_raised_leaves_a_usable_hook(tmp_path):
    """Keras calls no *_end callback when fit raises; the next fit must start clean."""
    x, y = data(12, 8)
    model = make_model(6)
    hook = smd_tf.KerasHook(str(tmp_path / "raised"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["gradients"])

    class Explode(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 1:
                raise KeyboardInterrupt("user stop")

    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook, Explode()])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    assert not getattr(model.train_function, "_smd_runner", False)
    assert "train_step" not in model.__dict__ and "call" not in model.layers[0].__dict__
    trial = create_trial(str(tmp_path / "raised"))
    # Step 1 began, then the user's callback raised before it ran: it has no gradients.
    assert trial.tensor(GRADS[0]).steps(mode=modes.TRAIN) == [0, 2, 3, 4]


def test_xla_compiled_step_and_steps_per_execution(tmp_path):
    """Capture works when Keras compiles the step with XLA, and with several batches per call."""
    x, y = data(16, 9)
    model = make_model(7)
    model.compile(keras.optimizers.SGD(LR), "mse", jit_compile=True)
    hook = smd_tf.KerasHook(str(tmp_path / "xla"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "layers"])
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path / "xla"))
    for k in range(3):
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        ref = reference([trial.tensor(w).value(k) for w in WEIGHTS], xb, yb)
        for name, expected in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(trial.tensor(name).value(k), expected, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(trial.tensor("hidden/outputs").value(k), ref["hidden"],
                                   rtol=1e-5, atol=1e-6)

    model = make_model(8)
    model.compile(keras.optimizers.SGD(LR), "mse", steps_per_execution=2)
    hook = smd_tf.KerasHook(str(tmp_path / "spe"), save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["gradients"])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(str(tmp_path / "spe"))
    assert trial.tensor(GRADS[0]).steps() == [0, 1]  # one step per call of 2 batches


MIRRORED_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import smdebug_lite.tensorflow as smd
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    model.compile(optimizer="sgd", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
hook = smd.KerasHook(sys.argv[1], save_config=smd.SaveConfig(save_interval=2),
                     include_collections=["weights", "gradients", "losses", "metrics", "outputs"])
rng = np.random.default_rng(0)
x, y = rng.random((64, 4), dtype=np.float32), rng.integers(0, 2, 64)
model.fit(x, y, batch_size=16, epochs=2, callbacks=[hook], verbose=0)
hook.close()
print("DISABLED" if hook.disabled else "OK")
"""


@pytest.mark.slow
def test_mirrored_strategy_trains_and_saves_one_replicas_tensors(tmp_path):
    """MirroredStrategy over two logical CPUs (a fresh process: devices are fixed at TF start):
    training runs, and the values saved are one replica's (half of each batch)."""
    out = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "SMDEBUG_LOG_LEVEL": "warning"}
    proc = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, str(out)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]
    trial = create_trial(str(out))
    assert trial.steps() == [0, 2, 3, 4, 6, 7]  # (3, 7: each epoch's last step, its logs)
    assert trial.tensor("labels").value(0).shape == (8, 1)  # one replica's half of 16
    assert trial.tensor("predictions").value(0).shape == (8, 2)
    assert trial.tensor("sequential/dense/kernel:0").value(4).shape == (4, 8)
    for name in ("gradients/sequential/dense/kernelGrad", "loss"):
        assert np.isfinite(trial.tensor(name).value(6)).all()
