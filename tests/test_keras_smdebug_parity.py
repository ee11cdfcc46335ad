"""What the Keras hook writes and offers where smdebug 1.0.34 had its own way, under Keras 2
(``tf_keras``) and Keras 3 alike, with real training: a DebugHookConfig's ``save_all`` given as a
number, labels and rank-1 inputs saved as ``(N, 1)``, inputs and labels given as a dict of one,
a subclassed model built by its first step, and the TF ``Collection`` that ``get_collection``
returns."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from lazy_module import lazy, require_module
from refvenv import ref_python, run_ref

from smdebug_lite import modes
from smdebug_lite.trials import create_trial

require_module("tensorflow")
tf = lazy("tensorflow")
smd_tf = lazy("smdebug_lite.tensorflow")
tf_keras_collection = lazy("smdebug_lite.tensorflow.keras_collection")


pytestmark = pytest.mark.usefixtures("no_current_hook")


def _functional(K, outputs: int = 1, input_name: str = "x"):
    K.utils.set_random_seed(0)
    x = K.Input((4,), name=input_name)
    h = K.layers.Dense(3, activation="relu", name="hidden")(x)
    model = K.Model(x, K.layers.Dense(outputs, name="out")(h))
    model.compile(K.optimizers.SGD(0.1), "mse")
    return model


def _data(n: int = 12):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 4)).astype("float32"), rng.normal(size=n).astype("float32")


def test_json_save_all_given_as_a_number_saves_every_collection(tmp_path, K):
    """smdebug's JSON parsing compared ``save_all`` with True, so ``1.0`` turned it on."""
    out = tmp_path / "run"
    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"LocalPath": str(out),
                                  "HookParameters": {"save_all": 1.0, "save_interval": "1"}}))
    hook = smd_tf.KerasHook.create_from_json_file(str(config))
    assert hook.save_all is True
    x, y = _data()
    _functional(K).fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    trial = create_trial(str(out))
    names = set(trial.tensor_names())
    assert {"hidden/kernel:0", "gradients/hidden/kernelGrad", "hidden/outputs", "inputs",
            "labels", "predictions", "loss"} <= names
    assert trial.steps(mode=modes.TRAIN) == [0, 1, 2]


def test_labels_and_rank1_inputs_are_saved_as_n_by_1(tmp_path, K):
    """smdebug saved a batch's inputs and labels as the Keras step of its days got them: rank-1
    arrays expanded to ``(N, 1)``; higher ranks unchanged."""
    x, y = _data()
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["inputs", "outputs"])
    _functional(K).fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    _functional(K).evaluate(x, y, batch_size=6, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    for k in range(3):
        np.testing.assert_array_equal(trial.tensor("labels").value(k, mode=modes.TRAIN),
                                      y[4 * k:4 * k + 4, None])
        np.testing.assert_array_equal(trial.tensor("inputs").value(k, mode=modes.TRAIN),
                                      x[4 * k:4 * k + 4])
    assert trial.tensor("labels").value(1, mode=modes.EVAL).shape == (6, 1)
    assert trial.tensor("predictions").value(0, mode=modes.TRAIN).shape == (4, 1)

    # A model taking one rank-1 input: its inputs are (N, 1) too.
    K.utils.set_random_seed(0)
    inp = K.Input((1,), name="scalar")
    model = K.Model(inp, K.layers.Dense(1, name="out")(inp))
    model.compile(K.optimizers.SGD(0.1), "mse")
    out = str(tmp_path / "rank1")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["inputs", "outputs"])
    model.fit(y, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    np.testing.assert_array_equal(trial.tensor("inputs").value(2), y[8:12, None])
    np.testing.assert_array_equal(trial.tensor("labels").value(2), y[8:12, None])


@pytest.mark.reference
def test_smdebug_reads_the_n_by_1_labels(tmp_path):
    """smdebug 1.0.34's trial reads the labels of a Keras 2 fit back as it saved them."""
    python, why = ref_python()
    if python is None:
        pytest.skip(why)
    K = pytest.importorskip("tf_keras")
    x, y = _data()
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["inputs", "outputs"])
    _functional(K).fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    reader = textwrap.dedent("""
        import json, sys
        from smdebug.trials import create_trial
        t = create_trial(sys.argv[1])
        print(json.dumps({"labels": [list(a.shape) for a in t.labels(step=1)],
                          "inputs": [list(a.shape) for a in t.inputs(step=1)],
                          "value": t.tensor("labels").value(2).tolist()}))
    """)
    proc = run_ref(reader, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["labels"] == [[4, 1]] and got["inputs"] == [[4, 4]]
    np.testing.assert_array_equal(np.asarray(got["value"], dtype=np.float32), y[8:12, None])


def test_a_dict_of_one_input_and_label_is_indexed(tmp_path, K):
    """As smdebug named them: a dict (or list) of tensors gets ``_<i>``, even with one (the
    model's predictions too)."""
    K.utils.set_random_seed(0)
    image = K.Input((4,), name="image")
    model = K.Model({"image": image}, {"out": K.layers.Dense(2, name="out")(image)})
    model.compile(K.optimizers.SGD(0.1), {"out": "mse"})
    rng = np.random.default_rng(1)
    xs = {"image": rng.normal(size=(8, 4)).astype("float32")}
    ys = {"out": rng.normal(size=(8, 2)).astype("float32")}
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["inputs", "outputs"])
    model.fit(xs, ys, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="inputs") == ["inputs_0"]
    assert sorted(trial.tensor_names(collection="outputs")) == ["labels_0", "predictions_0"]
    np.testing.assert_array_equal(trial.tensor("labels_0").value(1), ys["out"][4:])


def test_subclassed_model_weights_from_the_first_step_they_exist(tmp_path, K):
    """Both Kerases build a subclassed model inside its first training step, so there are no
    weights to read before step 0 (smdebug 1.0.34, which listed a mode's weights once, at the
    mode's first step, saved none in that mode); they are saved from step 1, and validation,
    which starts with the model built, has them from its first step."""

    class Sub(K.Model):
        def __init__(self):
            super().__init__(name="sub")
            self.d1 = K.layers.Dense(3, name="d1")
            self.d2 = K.layers.Dense(1, name="d2")

        def call(self, inputs):
            return self.d2(self.d1(inputs))

    K.utils.set_random_seed(0)
    model = Sub()
    model.compile(K.optimizers.SGD(0.1), "mse")
    x, y = _data()
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases"])
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False,
              validation_data=(x[:8], y[:8]), validation_batch_size=4, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    kernels = trial.tensor_names(collection="weights")
    assert len(kernels) == 2 and len(trial.tensor_names(collection="biases")) == 2
    for name in kernels:
        assert trial.tensor(name).steps(mode=modes.TRAIN) == [1, 2]
        assert trial.tensor(name).steps(mode=modes.EVAL) == [0, 1]
    # Read before each step: step k+1's values are step k's after the update.
    d2 = next(n for n in kernels if "d2" in n)
    assert not np.array_equal(trial.tensor(d2).value(1, mode=modes.TRAIN),
                              trial.tensor(d2).value(2, mode=modes.TRAIN))
    np.testing.assert_array_equal(trial.tensor(d2).value(0, mode=modes.EVAL),
                                  model.get_layer("d2").kernel.numpy())


def test_get_collection_gives_the_tf_collection(tmp_path, K):
    """smdebug's TF collection methods on the hook's own collections, no conversion needed."""
    from smdebug_lite.compat.tensorflow.collection import Collection as CompatCollection

    assert CompatCollection is tf_keras_collection.Collection
    model = _functional(K, outputs=2)
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["custom", "weights"])
    custom = hook.get_collection("custom")
    assert type(custom) is tf_keras_collection.Collection
    assert all(isinstance(c, tf_keras_collection.Collection) for c in hook.get_collections().values())
    assert isinstance(hook.get_collection("weights"), tf_keras_collection.Collection)
    custom.add_keras_layer(model.get_layer("hidden"), inputs=True)
    custom.add_variable(model.get_layer("out").kernel)
    hook.collection_manager.add(hook.collection_manager.get("other", create_if_not_exists=True))
    assert isinstance(hook.get_collections()["other"], tf_keras_collection.Collection)
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    model.fit(x, x[:, :2], batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    assert sorted(trial.tensor_names(collection="custom")) == [
        "hidden/inputs", "hidden/outputs", "out/kernel:0"]
    # A hook built from a DebugHookConfig: its configured collections are the TF class too.
    config = tmp_path / "hook.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "json"),
                                  "CollectionConfigurations": [{"CollectionName": "mine"}]}))
    hook = smd_tf.KerasHook.create_from_json_file(str(config))
    assert isinstance(hook.get_collection("mine"), tf_keras_collection.Collection)
    hook.get_collection("mine").add_keras_layer("hidden")
    hook.close()


@pytest.mark.filterwarnings("ignore:Gradients do not exist")  # (Keras 3, the seed state)
def test_optimizer_variables_are_its_iteration_and_rate_under_a_tape(tmp_path, K):
    """What smdebug saved of a ``tf.keras`` optimizer, in both flavours: no per-weight slots,
    so a bias's momentum does not land in ``biases`` by its regex either. ``model.variables``
    (as smdebug's gradient-tape example passes them) also holds Keras 3's Dropout seed state,
    which is no weight."""
    out = str(tmp_path / "run")
    hook = smd_tf.KerasHook(out, save_config=smd_tf.SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "optimizer_variables"])
    K.utils.set_random_seed(0)
    model = K.Sequential([K.Input((4,)), K.layers.Dense(3, activation="relu", name="hidden"),
                          K.layers.Dropout(0.2), K.layers.Dense(1, name="out")])
    opt = K.optimizers.Adam(0.01)
    hook.wrap_optimizer(opt)
    hook.register_model(model)
    x, y = _data(8)
    for _ in range(2):
        with hook.wrap_tape(tf.GradientTape()) as tape:
            loss = tf.reduce_mean((model(x, training=True)[:, 0] - y) ** 2)
        grads = tape.gradient(loss, model.variables)
        opt.apply_gradients(zip(grads, model.variables, strict=True))
    hook.close()
    trial = create_trial(out)
    names = trial.tensor_names(collection="optimizer_variables")
    assert len(names) == 2 and {n.rsplit("/", 1)[-1] for n in names} == \
        {"iteration:0", "learning_rate:0"}
    assert [n.rsplit("/", 2)[-2:] for n in trial.tensor_names(collection="biases")] == \
        [["hidden", "bias:0"], ["out", "bias:0"]]
    assert [n.rsplit("/", 2)[-2:] for n in trial.tensor_names(collection="weights")] == \
        [["hidden", "kernel:0"], ["out", "kernel:0"]]
    assert not [n for n in trial.tensor_names() if "momentum" in n or "velocity" in n
                or "/m/" in n or "/v/" in n]
