"""KerasHook on Keras 2 models (the ``tf_keras`` package): fit with validation, evaluate,
predict, legacy and current optimizers, eager and compiled steps, mixed precision, custom
GradientTape loops, functional/subclassed models with dict inputs, embeddings and LSTMs. Values
are checked against computations done independently here."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import numpy as np
import pytest
from keras_reference import check_fit_layout, data, reference
from lazy_module import lazy, require_module
from legacy_keras import run_legacy_script
from refvenv import ref_python, run_ref

from smdebug_lite import modes
from smdebug_lite.trials import create_trial

require_module("tensorflow", "tf_keras")
tf = lazy("tensorflow")
K = lazy("tf_keras")
smd_tf = lazy("smdebug_lite.tensorflow")
tf_flavor = lazy("smdebug_lite.tensorflow.flavor")

LR = 0.1
BATCH = 4
REPO = Path(__file__).resolve().parents[1]

# Keras 2 names variables by TensorFlow's graph name: no model prefix in a Sequential model.
WEIGHTS = ["hidden/kernel:0", "hidden/bias:0", "out/kernel:0", "out/bias:0"]
GRADS = ["gradients/hidden/kernelGrad", "gradients/hidden/biasGrad",
         "gradients/out/kernelGrad", "gradients/out/biasGrad"]


def make_model(optimizer=None, seed: int = 0, run_eagerly: bool = False):
    K.utils.set_random_seed(seed)
    model = K.Sequential([
        K.layers.Dense(3, activation="relu", name="hidden", input_shape=(4,)),
        K.layers.Dense(2, name="out"),
    ], name="net")
    model.compile(optimizer or K.optimizers.SGD(LR), "mse", metrics=["mae"],
                  run_eagerly=run_eagerly)
    return model


def _log_recorder():
    """A callback keeping the logs Keras hands it; built here because its base class comes
    from Keras, imported on first use."""

    class LogRecorder(K.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.train = []

        def on_train_batch_end(self, batch, logs=None):
            self.train.append({k: float(v) for k, v in (logs or {}).items()})

    return LogRecorder()


pytestmark = pytest.mark.usefixtures("no_current_hook")


def test_flavor_follows_the_keras_that_made_the_object():
    assert tf_flavor.flavor_of(K.optimizers.Adam()).name == "keras2"
    assert tf_flavor.flavor_of(K.optimizers.legacy.SGD()).name == "keras2"
    assert tf_flavor.flavor_of(make_model()).name == "keras2"
    keras3 = pytest.importorskip("keras")
    assert tf_flavor.flavor_of(keras3.optimizers.Adam()).name == "keras3"


@pytest.mark.parametrize("optimizer", ["sgd", "legacy_sgd", "eager"])
def test_fit_evaluate_predict_match_independent_values(tmp_path, caplog, optimizer):
    caplog.set_level(logging.WARNING, logger="smdebug_lite")
    opt = K.optimizers.legacy.SGD(LR) if optimizer == "legacy_sgd" else K.optimizers.SGD(LR)
    model = make_model(opt, run_eagerly=optimizer == "eager")
    x, y = data(12, 1)
    xv, yv = data(8, 2)
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "layers", "outputs",
                                          "losses", "metrics"])
    rec = _log_recorder()
    history = model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                        validation_data=(xv, yv), callbacks=[hook, rec])
    model.evaluate(xv, yv, batch_size=BATCH, verbose=0, callbacks=[hook])
    predicted = model.predict(xv, batch_size=BATCH, verbose=0, callbacks=[hook])
    hook.close()
    assert not [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and r.name.startswith("smdebug_lite")]

    # The model and its optimizer are left exactly as Keras built them.
    assert not getattr(model.train_function, "_smd_runner", False)
    assert "train_step" not in model.__dict__ and "call" not in model.layers[0].__dict__
    assert "apply_gradients" not in model.optimizer.__dict__

    trial = create_trial(out)
    check_fit_layout(trial, WEIGHTS, GRADS)

    def at(name, step, mode=modes.TRAIN):
        return trial.tensor(name).value(step, mode=mode)

    for k in range(6):
        xb, yb = x[(k % 3) * BATCH:(k % 3 + 1) * BATCH], y[(k % 3) * BATCH:(k % 3 + 1) * BATCH]
        ref = reference([at(w, k) for w in WEIGHTS], xb, yb)
        for name, expected in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(at(name, k), expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(at("hidden/outputs", k), ref["hidden"], atol=1e-6)
        np.testing.assert_allclose(at("predictions", k), ref["pred"], atol=1e-5)
        np.testing.assert_allclose(at("labels", k), yb)
        np.testing.assert_allclose(at("loss", k), [rec.train[k]["loss"]], rtol=1e-6)
        np.testing.assert_allclose(at("mae", k), [rec.train[k]["mae"]], rtol=1e-6)
        if k < 5:  # weights are saved before each step: SGD moved them by -lr * gradient
            for w, g in zip(WEIGHTS, GRADS, strict=True):
                np.testing.assert_allclose(at(w, k + 1), at(w, k) - LR * at(g, k),
                                           rtol=1e-5, atol=1e-6)
    # Validation in every epoch and evaluate: Keras 2 hands these loops their step function
    # before any callback runs, and the hook still sees each step.
    for k in range(6):
        xb, yb = xv[(k % 2) * BATCH:(k % 2 + 1) * BATCH], yv[(k % 2) * BATCH:(k % 2 + 1) * BATCH]
        ref = reference([at(w, k, modes.EVAL) for w in WEIGHTS], xb, yb)
        np.testing.assert_allclose(at("hidden/outputs", k, modes.EVAL), ref["hidden"], atol=1e-6)
        assert at("loss", k, modes.EVAL).shape == (1,)
    assert trial.tensor(GRADS[0]).steps(mode=modes.EVAL) == []
    # Keras' batch index within the epoch (or loop) is saved as the ``batch`` metric, every mode.
    assert [int(at("batch", k)[0]) for k in range(6)] == [0, 1, 2, 0, 1, 2]
    assert [int(at("batch", k, modes.PREDICT)[0]) for k in range(2)] == [0, 1]
    assert "batch" in trial.tensor_names(collection="metrics")
    assert trial.tensor("val_loss").steps(mode=modes.EVAL) == [1, 3]
    np.testing.assert_allclose([at("val_loss", s, modes.EVAL)[0] for s in (1, 3)],
                               history.history["val_loss"], rtol=1e-6)
    np.testing.assert_allclose(
        np.concatenate([at("predictions", s, modes.PREDICT) for s in (0, 1)]), predicted,
        atol=1e-6)


def test_adam_optimizer_variables_and_the_first_step_of_a_lazy_optimizer(tmp_path, caplog):
    """A Keras 2 optimizer's variables are what smdebug 1.0.34 saved for tf.keras: the iteration
    count and the hyperparameters held as variables, not the slots (which would also fall in
    ``biases``). A legacy optimizer makes them at the first update: nothing to save before step
    0, which is no mistake worth a warning."""
    caplog.set_level(logging.WARNING, logger="smdebug_lite")
    expected = {
        "legacy": {"Adam/iter:0", "Adam/beta_1:0", "Adam/beta_2:0", "Adam/decay:0",
                   "Adam/learning_rate:0"},
        "new": {"iteration:0", "learning_rate:0"},
    }
    for kind, opt in (("new", K.optimizers.Adam(0.01)), ("legacy", K.optimizers.legacy.Adam(0.01))):
        out = str(tmp_path / kind)
        hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                         include_collections=["optimizer_variables", "losses", "biases"])
        x, y = data(12, 1)
        make_model(opt).fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
        hook.close()
        trial = create_trial(out)
        assert set(trial.tensor_names(collection="optimizer_variables")) == expected[kind]
        assert set(trial.tensor_names(collection="biases")) == {"hidden/bias:0", "out/bias:0"}
        iteration = "Adam/iter:0" if kind == "legacy" else "iteration:0"
        # read before each step: the updates done so far
        assert [int(trial.tensor(iteration).value(s)) for s in (1, 2)] == [1, 2]
    assert not [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and r.name.startswith("smdebug_lite")]


def test_mixed_precision_gradients_are_unscaled(tmp_path):
    K.mixed_precision.set_global_policy("mixed_float16")
    try:
        K.utils.set_random_seed(0)
        model = K.Sequential([
            K.layers.Dense(3, activation="relu", name="hidden", input_shape=(4,)),
            K.layers.Dense(2, name="out", dtype="float32"),
        ])
        model.compile(K.optimizers.SGD(LR), "mse")
        assert "LossScaleOptimizer" in type(model.optimizer).__name__
        x, y = data(8, 1)
        out = str(tmp_path / "run")
        hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                         include_collections=["weights", "biases", "gradients"])
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[hook])
        hook.close()
    finally:
        K.mixed_precision.set_global_policy("float32")
    trial = create_trial(out)
    ref = reference([trial.tensor(w).value(0) for w in WEIGHTS], x[:BATCH], y[:BATCH])
    for name, expected in zip(GRADS, ref["grads"], strict=True):
        # float16 forward pass: close to the float32 gradient, nowhere near the loss scale
        np.testing.assert_allclose(trial.tensor(name).value(0), expected, rtol=0.05, atol=5e-3)


def test_gradient_tape_loop_and_wrapped_legacy_optimizer(tmp_path):
    model = make_model()
    opt = K.optimizers.legacy.SGD(LR)
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "losses"])
    x, y = data(12, 1)
    losses = []
    for k in range(3):
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        with hook.wrap_tape(tf.GradientTape()) as tape:
            loss = tf.reduce_mean(tf.square(model(xb) - yb))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        hook.save_scalar("tape_loss", float(loss))
        losses.append(float(loss))
    hook.close()
    trial = create_trial(out)
    assert trial.steps() == [0, 1, 2]
    for k in range(3):
        xb, yb = x[k * BATCH:(k + 1) * BATCH], y[k * BATCH:(k + 1) * BATCH]
        ref = reference([trial.tensor(w).value(k) for w in WEIGHTS], xb, yb)
        for name, expected in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(trial.tensor(name).value(k), expected, rtol=1e-5,
                                       atol=1e-6)
        np.testing.assert_allclose(trial.tensor("loss").value(k), [losses[k]], rtol=1e-6)
        np.testing.assert_allclose(trial.tensor("scalar/tape_loss").value(k), [losses[k]],
                                   rtol=1e-6)

    # wrap_optimizer: a custom loop without a wrapped tape saves what apply_gradients gets.
    out2 = str(tmp_path / "wrapped")
    hook = smd_tf.KerasHook(out2, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["gradients"])
    opt2 = hook.wrap_optimizer(K.optimizers.legacy.SGD(LR))
    hook.set_mode(modes.TRAIN)
    hook.start_step()
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x[:BATCH]) - y[:BATCH]))
    grads = tape.gradient(loss, model.trainable_variables)
    opt2.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    hook.close()
    trial = create_trial(out2)
    np.testing.assert_allclose(trial.tensor(GRADS[0]).value(0), grads[0].numpy(), rtol=1e-6)

    # A wrapped legacy optimizer in a tape loop: its variables as smdebug named them, read
    # before each update (it makes them at its first one).
    out3 = str(tmp_path / "optimizer_variables")
    hook = smd_tf.KerasHook(out3, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["optimizer_variables"])
    opt3 = hook.wrap_optimizer(K.optimizers.legacy.Adam(0.01))
    for _ in range(3):
        with hook.wrap_tape(tf.GradientTape()) as tape:
            loss = tf.reduce_mean(tf.square(model(x[:BATCH]) - y[:BATCH]))
        grads = tape.gradient(loss, model.trainable_variables)
        opt3.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    hook.close()
    trial = create_trial(out3)
    assert trial.tensor_names(collection="optimizer_variables") == [
        "Adam/beta_1:0", "Adam/beta_2:0", "Adam/decay:0", "Adam/iter:0", "Adam/learning_rate:0"]
    assert [int(trial.tensor("Adam/iter:0").value(s)) for s in (1, 2)] == [1, 2]
    np.testing.assert_allclose(trial.tensor("Adam/learning_rate:0").value(1), 0.01, rtol=1e-6)


def test_functional_dict_model_with_embedding_lstm_and_subclassing(tmp_path):
    tok = K.Input((5,), dtype="int32", name="tok")
    num = K.Input((3,), name="num")
    seq = K.layers.LSTM(6, name="lstm")(K.layers.Embedding(20, 4, name="emb")(tok))
    joined = K.layers.Concatenate(name="cat")([seq, num])
    model = K.Model({"tok": tok, "num": num},
                    {"a": K.layers.Dense(1, name="a")(joined),
                     "b": K.layers.Dense(2, name="b")(joined)})
    model.compile(optimizer=K.optimizers.legacy.Adam(), loss={"a": "mse", "b": "mse"})
    rng = np.random.default_rng(0)
    xs = {"tok": rng.integers(0, 20, (16, 5)), "num": rng.random((16, 3), dtype=np.float32)}
    ys = {"a": rng.random((16, 1), dtype=np.float32), "b": rng.random((16, 2), dtype=np.float32)}
    out = str(tmp_path / "functional")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "gradients", "losses", "layers", "inputs",
                                          "outputs"])
    model.fit(xs, ys, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    names = set(trial.tensor_names())
    assert {"gradients/emb/embeddingsGrad", "gradients/lstm/lstm_cell/kernelGrad",
            "cat/inputs_0", "cat/inputs_1", "a_loss", "b_loss", "loss",
            "inputs_0", "inputs_1", "labels_0", "labels_1"} <= names
    # The embedding's gradient (IndexedSlices inside Keras) is saved dense, full table shape.
    assert trial.tensor("gradients/emb/embeddingsGrad").value(0).shape == (20, 4)
    tokens = {trial.tensor("inputs_0").value(0).dtype.kind, trial.tensor("inputs_1").value(0).dtype.kind}
    assert tokens == {"i", "f"}

    class Sub(K.Model):
        def __init__(self):
            super().__init__(name="sub")
            self.d1 = K.layers.Dense(4, name="d1")
            self.d2 = K.layers.Dense(1, name="d2")

        def call(self, inputs):
            return self.d2(self.d1(inputs))

    sub = Sub()
    sub.compile(optimizer=K.optimizers.SGD(LR), loss="mse")
    out = str(tmp_path / "subclassed")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "gradients", "layers"])
    xb = rng.random((8, 3), dtype=np.float32)
    sub.fit(xb, rng.random((8, 1), dtype=np.float32), batch_size=4, epochs=1, verbose=0,
            shuffle=False, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    assert {"d1/outputs", "d2/outputs", "gradients/sub/d1/kernelGrad"} <= set(trial.tensor_names())
    np.testing.assert_allclose(trial.tensor("d1/inputs").value(0), xb[:4])


def test_json_config_builds_a_hook_for_a_keras2_model(tmp_path):
    config = {"LocalPath": str(tmp_path / "run"), "HookParameters": {"save_interval": "2"},
              "CollectionConfigurations": [{"CollectionName": "gradients"},
                                           {"CollectionName": "losses"}]}
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(config))
    hook = smd_tf.get_hook("keras", json_config_path=str(path), create_if_not_exists=True)
    x, y = data(24, 3)
    make_model().fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(config["LocalPath"])
    assert trial.tensor(GRADS[0]).steps() == [0, 2, 4]
    # An epoch without validation: its last step gets the epoch's logs, as smdebug saved them.
    assert trial.tensor("loss").steps() == [0, 2, 4, 5]


# -- TF_USE_LEGACY_KERAS=1: tf.keras *is* tf_keras, as in a user's unchanged TF 2.x script ------

LEGACY_SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tensorflow as tf
    import tf_keras
    assert tf.keras.Sequential is tf_keras.Sequential, "tf.keras is not Keras 2"
    {setup}
    import smdebug.tensorflow as smd

    def model():
        m = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="relu", name="hidden",
                                                       input_shape=(4,)),
                                 tf.keras.layers.Dense(2, name="out")])
        m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
        return m

    x = np.random.default_rng(0).normal(size=(24, 4)).astype("float32")
    y = np.random.default_rng(1).normal(size=(24, 2)).astype("float32")
    with {strategy}.scope():
        m = model()
    hook = smd.KerasHook(sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                         include_collections=["weights", "biases", "gradients", "losses"])
    m.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    m.evaluate(x, y, batch_size=8, verbose=0, callbacks=[hook])
    hook.close()
""")

def _run_legacy(tmp_path: Path, mirrored: bool) -> str:
    return run_legacy_script(LEGACY_SCRIPT, str(tmp_path / ("mirrored" if mirrored else "run")),
                             mirrored)


@pytest.mark.slow
def test_unchanged_tf_keras_script_under_legacy_keras(tmp_path):
    out = _run_legacy(tmp_path, mirrored=False)
    trial = create_trial(out)
    assert set(trial.tensor_names(collection="weights")) == {"hidden/kernel:0", "out/kernel:0"}
    assert set(trial.tensor_names(collection="gradients")) == set(GRADS)
    assert trial.steps(mode=modes.TRAIN) == list(range(6))
    assert trial.steps(mode=modes.EVAL) == list(range(3))
    assert trial.tensor("loss").steps(mode=modes.EVAL) == [0, 1, 2]


@pytest.mark.slow
def test_mirrored_strategy_on_two_logical_cpus(tmp_path):
    """Each replica computes its part of the gradient on half of the batch; the hook saves the
    first replica's tensors (not Keras' sum of every element over the replicas)."""
    out = _run_legacy(tmp_path, mirrored=True)
    trial = create_trial(out)
    assert set(trial.tensor_names(collection="gradients")) == set(GRADS)
    assert trial.steps(mode=modes.TRAIN) == list(range(6))
    x = np.random.default_rng(0).normal(size=(24, 4)).astype("float32")
    y = np.random.default_rng(1).normal(size=(24, 2)).astype("float32")
    for k in range(6):
        weights = [trial.tensor(w).value(k) for w in WEIGHTS]
        xb, yb = x[4 * k:4 * k + 2], y[4 * k:4 * k + 2]  # the first replica's half
        ref = reference(weights, xb, yb)  # mean over 2 samples; Keras scales by the global 4
        for name, expected in zip(GRADS, ref["grads"], strict=True):
            np.testing.assert_allclose(trial.tensor(name).value(k), expected / 2, rtol=1e-4,
                                       atol=1e-6)


@pytest.mark.reference
def test_smdebug_reads_what_the_keras2_hook_wrote(tmp_path):
    python, why = ref_python()
    if python is None:
        pytest.skip(why)
    out = _run_legacy(tmp_path, mirrored=False)
    ours = create_trial(out)
    reader = textwrap.dedent("""
        import json, sys
        from smdebug.trials import create_trial
        t = create_trial(sys.argv[1])
        names = {c: sorted(t.tensor_names(collection=c))
                 for c in ("weights", "gradients", "losses")}
        values = {f"{n}@{s}": t.tensor(n).value(s).tolist()
                  for n in names["weights"] + names["gradients"] for s in (0, 5)}
        print(json.dumps({"names": names, "steps": t.steps(), "values": values,
                          "loss": [float(t.tensor("loss").value(s)[0]) for s in t.steps()]}))
    """)
    proc = run_ref(reader, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["names"]["weights"] == ["hidden/kernel:0", "out/kernel:0"]
    assert got["names"]["gradients"] == sorted(GRADS)
    assert "loss" in got["names"]["losses"]
    assert got["steps"] == ours.steps()
    for key, value in got["values"].items():
        name, step = key.rsplit("@", 1)
        np.testing.assert_array_equal(np.asarray(value, dtype=np.float32),
                                      ours.tensor(name).value(int(step)))
    np.testing.assert_allclose(got["loss"], [ours.tensor("loss").value(s)[0] for s in ours.steps()])


def test_should_save_tensor_or_collection_as_framework_integrations_ask(tmp_path):
    """smdebug's semi-internal step API that framework integrations call on a hook."""
    hook = smd_tf.KerasHook(str(tmp_path / "run"), save_config=smd_tf.SaveConfig(save_interval=3),
                     include_collections=["gradients", "custom"])
    hook.get_collection("custom").include("dense")
    assert not hook.should_save_tensor_or_collection("dense", "layers")  # not prepared yet
    hook.register_model(make_model())
    hook.set_mode(modes.TRAIN)
    hook._prepare_collections_for_tf2()
    hook._increment_step()
    assert hook.step == 0
    assert hook.should_save_tensor_or_collection("hidden/kernel:0", "gradients")
    assert hook.should_save_tensor_or_collection("dense_1", "layers")  # custom's regex
    assert not hook.should_save_tensor_or_collection("flatten", "layers")
    hook._increment_step()  # step 1: nothing saves
    assert not hook.should_save_tensor_or_collection("hidden/kernel:0", "gradients")
    hook.close()
