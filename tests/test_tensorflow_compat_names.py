"""``smdebug.tensorflow`` and its submodules, imported as code written for smdebug 1.0.34 imports
them (through the alias), with real TensorFlow, Keras and KerasHook runs behind each check."""

from __future__ import annotations

import importlib
import json
import logging

import numpy as np
import pytest
from lazy_module import lazy, require_module

import _smdebug_lite_alias

_smdebug_lite_alias.install()

from smdebug.core.collection import DEFAULT_TF_COLLECTIONS  # noqa: E402

from smdebug_lite.exceptions import SMDebugError, SMDebugNotImplementedError  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402

require_module("tensorflow", "keras")
tf = lazy("tensorflow")
keras = lazy("keras")
smd = lazy("smdebug.tensorflow")
tf_collection = lazy("smdebug.tensorflow.collection")
constants = lazy("smdebug.tensorflow.constants")
tf_reductions_module = lazy("smdebug.tensorflow.reductions")
utils = lazy("smdebug.tensorflow.utils")
smd_keras = lazy("smdebug.tensorflow.keras")
tf_session = lazy("smdebug.tensorflow.session")
tf_singleton_utils = lazy("smdebug.tensorflow.singleton_utils")

# module -> where it is served from, and names code written for smdebug imports from it
SERVED = {
    "smdebug.tensorflow": ("smdebug_lite.tensorflow", [
        "KerasHook", "SessionHook", "EstimatorHook", "Collection", "CollectionKeys", "SaveConfig",
        "SaveConfigMode", "ReductionConfig", "modes", "create_trial", "get_hook", "set_hook",
        "del_hook"]),
    "smdebug.tensorflow.utils": ("smdebug_lite.compat.tensorflow.utils", [
        "TF_VERSION", "TFDistributionStrategy", "ModelOutput", "ModelOutputs", "ModelInput",
        "ModelInputs", "get_model_output_export_name", "get_model_input_export_name",
        "is_tf_version_2x", "is_tf_version_1_15_x", "is_tf_version_2_2_x", "is_tf_version_2_3_x",
        "is_tf_version_2_4_x", "is_tf_version_greater_than_2_4_x",
        "is_profiler_supported_for_tf_version", "does_tf_support_mixed_precision_training",
        "is_current_version_supported", "get_current_version", "supported_tf_variables",
        "get_export_name_for_keras", "is_keras_optimizer", "is_valid_tf_tensor",
        "is_IndexedSlices", "load_tf_config_json", "is_parameter_server_strategy",
        "get_worker_id_from_tf_config", "get_num_workers_from_tf_config",
        "get_chief_worker_from_tf_config", "is_mirrored_strategy", "node_name",
        "extract_graph_summary", "tensor_can_be_saved", "build_fetches_tuple",
        "get_original_fetch_ops", "get_keras_layer_inputs", "get_keras_layer_outputs",
        "get_keras_mode", "get_non_device_tensors", "LayerWithHooks", "InputOutputSaver",
        "get_layer_call_fn"]),
    "smdebug.tensorflow.constants": ("smdebug_lite.compat.tensorflow.constants", [
        "SMDEBUG_GRADIENTS_KEY", "SMDEBUG_LAYER_OUTPUTS_KEY", "SMDEBUG_PREFIX",
        "TF_DEFAULT_SAVED_COLLECTIONS"]),
    "smdebug.tensorflow.collection": ("smdebug_lite.compat.tensorflow.collection", [
        "Collection", "CollectionManager", "CollectionKeys"]),
    "smdebug.tensorflow.keras": ("smdebug_lite.compat.tensorflow.keras", ["KerasHook"]),
    "smdebug.tensorflow.session": ("smdebug_lite.compat.tensorflow.session", [
        "SessionHook", "EstimatorHook"]),
    "smdebug.tensorflow.reductions": ("smdebug_lite.tensorflow.reductions", [
        "get_tensorflow_reduction"]),
    "smdebug.tensorflow.singleton_utils": ("smdebug_lite.compat.tensorflow.singleton_utils", [
        "get_hook", "set_hook", "del_hook"]),
}


@pytest.fixture(autouse=True)
def _no_hook():
    tf_singleton_utils.del_hook()
    yield
    tf_singleton_utils.del_hook()


@pytest.mark.parametrize("module", list(SERVED))
def test_every_name_imports_through_the_alias(module):
    served_by, names = SERVED[module]
    mod = importlib.import_module(module)
    assert mod is importlib.import_module(served_by)
    assert mod.__spec__.name == served_by
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"


def test_the_same_objects_under_every_name():
    from smdebug_lite.tensorflow.reductions import get_tensorflow_reduction
    from smdebug_lite.trials import create_trial

    assert smd.create_trial is create_trial
    assert smd.KerasHook is smd_keras.KerasHook
    assert smd.SessionHook is tf_session.SessionHook
    assert smd.EstimatorHook is tf_session.EstimatorHook
    assert tf_collection.CollectionKeys is smd.CollectionKeys
    assert tf_reductions_module.get_tensorflow_reduction is get_tensorflow_reduction
    assert "create_trial" in dir(smd) or "create_trial" in smd.__all__


# -- TF1 hooks --------------------------------------------------------------------------------


@pytest.mark.parametrize(("cls", "api"), [("SessionHook", "tf.compat.v1.Session"),
                                          ("EstimatorHook", "tf.estimator")])
def test_tf1_hooks_refuse_to_be_built_and_point_to_keras_hook(tmp_path, cls, api):
    cls = getattr(tf_session, cls)  # by name, so that collecting does not import TensorFlow
    for build in (lambda: cls(out_dir=str(tmp_path / "run")), cls, cls.create_from_json_file):
        with pytest.raises(SMDebugNotImplementedError) as info:
            build()
        message = str(info.value)
        assert api in message and "KerasHook" in message and "2.16" in message
        assert isinstance(info.value, NotImplementedError)
    assert not (tmp_path / "run").exists()
    assert issubclass(tf_session.EstimatorHook, tf_session.SessionHook)


def test_get_hook_of_a_tf1_type_is_none(caplog):
    with caplog.at_level(logging.ERROR):
        assert tf_singleton_utils.get_hook("session") is None and tf_singleton_utils.get_hook("estimator") is None
    assert "TF1" in caplog.text


# -- utils ----------------------------------------------------------------------------------


def test_version_predicates_follow_the_installed_tensorflow():
    from packaging import version

    assert utils.TF_VERSION == version.parse(tf.__version__) == utils.get_current_version()
    assert utils.TF_VERSION >= version.parse("2.16")
    assert utils.is_tf_version_2x() and utils.is_tf_version_greater_than_2_4_x()
    assert utils.is_profiler_supported_for_tf_version()
    for old in (utils.is_tf_version_1_15_x, utils.is_tf_version_2_2_x,
                utils.is_tf_version_2_3_x, utils.is_tf_version_2_4_x,
                utils.does_tf_support_mixed_precision_training):
        assert old() is False, old.__name__
    assert utils.is_current_version_supported()
    assert utils.is_current_version_supported("2.16.1")
    assert not utils.is_current_version_supported("2.15.0")


def test_model_input_and_output_names():
    assert utils.ModelOutputs == {"smdebug_y", "smdebug_y_pred", "val_smdebug_y",
                                  "val_smdebug_y_pred"}
    assert [utils.get_model_output_export_name(k) for k in (
        utils.ModelOutput.LABELS, utils.ModelOutput.VAL_LABELS, utils.ModelOutput.PREDICTIONS,
        utils.ModelOutput.VAL_PREDICTIONS)] == ["labels", "labels", "predictions", "predictions"]
    with pytest.raises(KeyError):
        utils.get_model_output_export_name("smdebug_x")
    assert utils.ModelInputs == {utils.ModelInput.INPUTS} == {"smdebug_x"}
    assert utils.get_model_input_export_name() == "model_input"
    assert {s.name: s.value for s in utils.TFDistributionStrategy} == {
        "NONE": 0, "HOROVOD": 1, "MIRRORED": 2, "PARAMETER_SERVER": 3, "SMDATAPARALLEL": 4,
        "UNSUPPORTED": 100}


CLUSTER = {"worker": ["w0:1", "w1:1", "w2:1"], "ps": ["p0:1"]}


def test_tf_config_helpers():
    with_chief = {"cluster": {"chief": ["c:1"], **CLUSTER}, "task": {"type": "ps", "index": 0}}
    text = json.dumps(with_chief)
    assert utils.load_tf_config_json(text) == with_chief
    assert utils.load_tf_config_json(None) is None and utils.load_tf_config_json("{") is None
    assert utils.is_parameter_server_strategy(with_chief)
    assert not utils.is_parameter_server_strategy(None)
    assert not utils.is_parameter_server_strategy({})
    assert not utils.is_parameter_server_strategy({"cluster": {"worker": ["w:1"]}})
    assert utils.get_worker_id_from_tf_config(with_chief) == "ps_0"
    assert utils.get_num_workers_from_tf_config(with_chief) == 4
    assert utils.get_num_workers_from_tf_config(with_chief) == 4  # the dict is left as it was
    assert with_chief["cluster"]["worker"] == CLUSTER["worker"]
    assert utils.get_chief_worker_from_tf_config(with_chief) == "chief_0"
    no_chief = {"cluster": CLUSTER, "task": {"type": "worker", "index": 2}}
    assert utils.get_worker_id_from_tf_config(no_chief) == "worker_2"
    assert utils.get_num_workers_from_tf_config(no_chief) == 3
    assert utils.get_chief_worker_from_tf_config(no_chief) == "worker_0"
    assert utils.is_mirrored_strategy(tf.distribute.MirroredStrategy(["/cpu:0"]))
    assert not utils.is_mirrored_strategy(tf.distribute.get_strategy())


def test_tensor_variable_and_optimizer_predicates():
    eager = tf.constant([1.0, 2.0])
    assert utils.is_valid_tf_tensor(eager) and not utils.is_valid_tf_tensor(np.ones(2))
    slices = tf.IndexedSlices(eager, tf.constant([0, 1]))
    assert utils.is_IndexedSlices(slices) and not utils.is_IndexedSlices(eager)
    variables = utils.supported_tf_variables()
    assert isinstance(tf.Variable(1.0), variables) and isinstance(keras.Variable(1.0), variables)
    assert not isinstance(eager, variables)
    assert utils.is_keras_optimizer(keras.optimizers.Adam())
    assert not utils.is_keras_optimizer(object()) and not utils.is_keras_optimizer(eager)


def test_is_keras_optimizer_knows_tf_keras():
    tf_keras = pytest.importorskip("tf_keras")
    assert utils.is_keras_optimizer(tf_keras.optimizers.SGD())
    assert utils.is_keras_optimizer(tf_keras.optimizers.legacy.SGD())


def _functional_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(3, activation="relu", name="hidden")(inputs)
    out = keras.layers.Dense(2, name="out")(hidden)
    model = keras.Model(inputs, out, name="net")
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def test_keras_layer_helpers():
    model = _functional_model()
    hidden = model.get_layer("hidden")
    assert utils.get_export_name_for_keras("hidden", "output") == "hidden/outputs"
    assert utils.get_export_name_for_keras("hidden", "input") == "hidden/inputs"
    assert utils.get_export_name_for_keras("hidden", "gradient") is None
    assert utils.get_export_name_for_keras(hidden, "weight", hidden.kernel) == (
        f"hidden/weights/{hidden.kernel.name}")
    [inp] = utils.get_keras_layer_inputs(hidden)
    [outp] = utils.get_keras_layer_outputs(hidden)
    assert tuple(inp.shape) == (None, 4) and tuple(outp.shape) == (None, 3)
    with pytest.raises(SMDebugError, match="has not been called"):
        utils.get_keras_layer_inputs(keras.layers.Dense(2, name="never_called"))
    assert [utils.get_keras_mode(m) for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT,
                                              ModeKeys.GLOBAL)] == ["train", "test", "predict",
                                                                    None]


def test_layer_hooks_see_inputs_and_outputs():
    dense = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    x = tf.constant([[1.0, 2.0]])
    wrapped = utils.LayerWithHooks(dense, [lambda i, o: o * 2])
    seen = []
    wrapped.register_hook(lambda i, o: seen.append((i, o)))
    np.testing.assert_array_equal(wrapped(x).numpy(), [[6.0, 6.0]])
    # (Keras may first trace the wrapper symbolically; the last call is the eager one)
    assert seen and np.array_equal(seen[-1][1].numpy(), [[6.0, 6.0]])

    layer = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="zeros")
    saver = utils.InputOutputSaver()
    layer._hooks = [saver]
    layer.call = utils.get_layer_call_fn(layer)
    np.testing.assert_array_equal(layer(x).numpy(), [[3.0, 3.0]])
    assert layer.old_call is not layer.call
    np.testing.assert_array_equal(saver.layer_input.numpy(), x.numpy())
    np.testing.assert_array_equal(saver.layer_output.numpy(), [[3.0, 3.0]])


def test_graph_helpers_on_a_real_graph():
    graph = tf.Graph()
    with graph.as_default():
        fed = tf.compat.v1.placeholder(tf.float32, [2], name="fed")
        unfed = tf.compat.v1.placeholder(tf.float32, [2], name="unfed")
        a = tf.add(fed, 1.0, name="a")
        b = tf.multiply(a, unfed, name="b")
    subgraph = {"fed", "a"}
    assert utils.tensor_can_be_saved(a, subgraph, {unfed})
    assert not utils.tensor_can_be_saved(b, subgraph, {unfed})
    assert utils.tensor_can_be_saved(b, subgraph, set())
    assert utils.node_name("^a") == "a" and utils.node_name("b:1") == "b"
    inputs, nodes, order = utils.extract_graph_summary(graph.as_graph_def())
    assert inputs["b"] == ["a", "unfed"] and nodes["fed"].op == "Placeholder"
    assert order["fed"] < order["a"] < order["b"]
    assert utils.get_non_device_tensors([]) == []


def test_session_fetch_helpers_name_the_tf1_api():
    for helper in (utils.build_fetches_tuple, utils.get_original_fetch_ops):
        with pytest.raises(SMDebugNotImplementedError, match=r"tf\.compat\.v1\.Session"):
            helper([tf.constant(1.0)])


# -- constants, reductions --------------------------------------------------------------------


def test_constants():
    assert constants.TF_DEFAULT_SAVED_COLLECTIONS == ["losses", "metrics", "sm_metrics"]
    assert constants.SMDEBUG_PREFIX == "smdebug_"
    assert constants.SMDEBUG_GRADIENTS_KEY == "smdebug_gradients"
    assert constants.SMDEBUG_LAYER_OUTPUTS_KEY == "smdebug_layer_outputs"


def test_get_tensorflow_reduction_gives_what_the_hook_saves():
    get = tf_reductions_module.get_tensorflow_reduction
    x = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)
    t = tf.constant(x)
    assert isinstance(get("max", t), tf.Tensor) and get("max", t).shape == ()
    assert float(get("max", t)) == 3.0 and float(get("max", t, True)) == 4.0
    assert float(get("min", t, on_absolute_values=True)) == 1.0
    np.testing.assert_allclose(float(get("variance", t)), np.var(x, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(float(get("l2", t)), np.linalg.norm(x.ravel()), rtol=1e-6)
    assert float(get("l1", t)) == 10.0
    with pytest.raises(SMDebugError, match="'median'"):
        get("median", t)


# -- collections ------------------------------------------------------------------------------


def test_tf_collection_manager_has_the_tf_built_ins(tmp_path):
    cm = tf_collection.CollectionManager()
    assert set(cm.collections) == DEFAULT_TF_COLLECTIONS
    assert all(isinstance(c, tf_collection.Collection) for c in cm.collections.values())
    assert isinstance(cm.get("new"), tf_collection.Collection)
    assert cm.get(smd.CollectionKeys.BIASES).include_regex == ["^(?!gradient).*bias"]
    cm.get("custom").add_keras_layer(keras.layers.Dense(1, name="fc"), inputs=True)
    cm.export(str(tmp_path), "collections.json")
    [path] = (tmp_path / "collections").rglob("collections.json")
    loaded = tf_collection.CollectionManager.load(str(path))
    assert loaded == cm
    assert isinstance(loaded.get("custom"), tf_collection.Collection)


def test_collection_add_turns_tf_objects_into_saved_names(caplog):
    coll = tf_collection.Collection("custom")
    coll.add([tf.Variable(1.0, name="scale"), keras.Variable(2.0, name="shift")])
    assert coll.tensor_names == {"scale:0", "shift:0"}
    coll.add_variable(tf.Variable(1.0), export_name="renamed")
    coll.add_tensor(tf.constant(1.0), name="named_value")
    assert {"renamed", "named_value"} <= coll.tensor_names
    with caplog.at_level(logging.WARNING):
        coll.add(tf.constant([1.0]))  # an eager tensor has no name
        coll.add("not a tensor")
    assert "no name" in caplog.text and "cannot add" in caplog.text
    assert len(coll.tensor_names) == 4
    graph = tf.Graph()
    with graph.as_default():
        op = tf.add(tf.constant(1.0), 2.0, name="sum_op").op
    coll.add(op)
    assert "sum_op:0" in coll.tensor_names


def test_add_keras_layer_matches_the_names_the_hook_saves():
    coll = tf_collection.Collection("custom")
    coll.add_keras_layer(keras.layers.Dense(1, name="dense"), inputs=True, outputs=False)
    assert coll.matches("dense/inputs") and coll.matches("dense/inputs_1")
    assert not coll.matches("dense/outputs") and not coll.matches("dense_1/inputs")
    coll.add_keras_layer("dense")  # a name works too; outputs by default
    assert coll.matches("dense/outputs")


def test_a_keras_hook_saves_what_a_tf_collection_names(tmp_path):
    model = _functional_model()
    hook = smd_keras.KerasHook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1),
                     include_collections=["custom"])
    custom = tf_collection.as_tf_collection(hook.get_collection("custom"))
    custom.add_keras_layer(model.get_layer("hidden"))
    custom.add(model.get_layer("out").kernel)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 2)).astype("float32")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[hook])
    hook.close()
    trial = smd.create_trial(str(tmp_path / "run"))
    assert sorted(trial.tensor_names(collection="custom")) == ["hidden/outputs", "out/kernel:0"]
    assert trial.tensor("hidden/outputs").steps() == [0, 1]


def test_keras_layer_helpers_on_a_keras_2_model():
    tf_keras = pytest.importorskip("tf_keras")
    inputs = tf_keras.Input((4,))
    hidden = tf_keras.layers.Dense(3, name="hidden")
    outputs = hidden(inputs)
    tf_keras.Model(inputs, tf_keras.layers.Dense(2)(outputs))
    [inp] = utils.get_keras_layer_inputs(hidden)
    [outp] = utils.get_keras_layer_outputs(hidden)
    assert tuple(inp.shape) == (None, 4) and tuple(outp.shape) == (None, 3)
    assert isinstance(hidden.kernel, utils.supported_tf_variables())
    coll = tf_collection.Collection("custom")
    coll.add(hidden.kernel)
    assert coll.tensor_names == {hidden.kernel.name}
