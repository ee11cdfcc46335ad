"""Collection, CollectionKeys, built-ins and CollectionManager (collections-file round trips)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import smdebug_lite as smd
from smdebug_lite import modes
from smdebug_lite.config.collection import (
    DEFAULT_INCLUDE_COLLECTIONS,
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    PYTORCH_EXTENSION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    Collection,
    CollectionKeys,
    builtin_collections,
)
from smdebug_lite.config.collection_manager import CollectionManager, CollectionNotFound
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugError, SMDebugValueError

GOLDEN = Path(__file__).parent / "data" / "golden"
GOLDEN_FILES = {
    name: GOLDEN / name / "collections" / "000000000" / "worker_0_collections.json"
    for name in ("pt_basic", "pt_reductions")
}
REPO = Path(__file__).resolve().parent.parent


# -- Collection --------------------------------------------------------------------------------


def test_collection_defaults_and_json_schema():
    c = smd.Collection("custom")
    assert c.name == "custom"
    assert c.include_regex == [] and c.tensor_names == set()
    assert c.reduction_config is None and c.save_config is None and c.save_histogram is True
    d = c.to_json_dict()
    assert list(d) == [
        "name",
        "include_regex",
        "tensor_names",
        "reduction_config",
        "save_config",
        "save_histogram",
    ]
    assert d == {
        "name": "custom",
        "include_regex": [],
        "tensor_names": [],
        "reduction_config": None,
        "save_config": None,
        "save_histogram": True,
    }


def test_collection_full_json_and_round_trip():
    c = Collection(
        "relu",
        include_regex=["relu.*output"],
        tensor_names=["b", "a"],
        reduction_config=ReductionConfig(reductions=["mean"], save_raw_tensor=True),
        save_config=SaveConfig(save_interval=2),
        save_histogram=False,
    )
    d = c.to_json_dict()
    assert d["tensor_names"] == ["a", "b"]  # exported sorted
    assert d["reduction_config"] == {
        "save_raw_tensor": True,
        "reductions": "mean",
        "save_shape": False,
    }
    assert d["save_config"]["TRAIN"] == {
        "save_interval": 2,
        "save_steps": [],
        "start_step": 0,
        "end_step": None,
    }
    assert Collection.from_dict(d) == c
    assert Collection.from_json(c.to_json()) == c
    assert Collection.from_json(c.to_json()).to_json() == c.to_json()


def test_membership_and_matching():
    c = Collection("c", include_regex="conv")
    assert c.include_regex == ["conv"]
    c.include(["dense_.*_output", "conv"])  # duplicates are skipped
    assert c.include_regex == ["conv", "dense_.*_output"]
    assert c.matches("model.conv1.weight")  # re.search, not match
    assert c.matches("dense_3_output_0")
    assert not c.matches("bias")
    c.add_tensor_name("bias")
    assert c.has_tensor_name("bias") and c.matches("bias")
    c.remove_tensor_name("bias")
    c.remove_tensor_name("never-there")
    assert not c.has_tensor_name("bias") and not c.matches("bias")
    c.include_regex = ["^x$"]
    assert c.matches("x") and not c.matches("conv")


def test_save_config_forms_accepted_by_collection():
    c = Collection("c", save_config={modes.TRAIN: SaveConfigMode(save_interval=1)})
    assert isinstance(c.save_config, SaveConfig)
    assert c.save_config.get_mode_config(modes.EVAL) is None
    c.save_config = SaveConfigMode(save_interval=3)
    assert c.save_config == SaveConfig(save_interval=3)
    c.save_config = None
    assert c.save_config is None
    c.reduction_config = {"reductions": "abs_mean", "save_raw_tensor": "true"}
    assert c.reduction_config == ReductionConfig(abs_reductions=["mean"], save_raw_tensor=True)
    c.save_histogram = "False"
    assert c.save_histogram is False


def test_from_dict_defaults_missing_include_regex_to_empty_list():
    c = Collection.from_dict({"name": "x"})
    assert c.include_regex == []  # smdebug set False here
    c.include("y")
    assert c.include_regex == ["y"]
    assert Collection.from_dict({"name": "x", "include_regex": False}).include_regex == []
    c = Collection.from_dict(
        {"name": "x", "reduction_config": None, "save_config": None, "future_key": 1}
    )
    assert c.reduction_config is None and c.save_config is None


def test_equality_and_hash_by_name():
    a, b = Collection("w", include_regex=["a"]), Collection("w", include_regex=["a"])
    assert a == b and hash(a) == hash(b)
    b.add_tensor_name("t")
    assert a != b and hash(a) == hash(b)
    assert len({a, Collection("other")}) == 2
    assert (a == "w") is False
    assert "w" in repr(a)


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (lambda: Collection(""), ["name", "''"]),
        (lambda: Collection(5), ["name", "5"]),
        (lambda: Collection("c", include_regex=["("]), ["include_regex", "'('"]),
        (lambda: Collection("c", include_regex=[3]), ["include_regex", "3"]),
        (lambda: Collection("c").include(7), ["include_regex", "7"]),
        (lambda: Collection("c", tensor_names="abc"), ["tensor_names", "abc"]),
        (lambda: Collection("c", tensor_names=[1]), ["tensor_names", "1"]),
        (lambda: Collection("c", save_histogram="maybe"), ["save_histogram", "maybe"]),
        (lambda: Collection("c", reduction_config=5), ["reduction_config", "5"]),
        (lambda: Collection("c", save_config=5), ["save_config", "5"]),
        (lambda: Collection.from_dict({"include_regex": []}), ["name"]),
        (
            lambda: Collection.from_dict(
                {"name": "c", "reduction_config": {"reductions": "median"}}
            ),
            ["median"],
        ),
        (lambda: Collection.from_dict("c"), ["collection", "c"]),
    ],
)
def test_invalid_collection_input(build, needles):
    with pytest.raises(SMDebugValueError) as info:
        build()
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


# -- keys, sets, built-ins ---------------------------------------------------------------------


def test_collection_keys_and_special_sets():
    k = CollectionKeys
    assert (k.ALL, k.DEFAULT, k.WEIGHTS, k.BIASES, k.GRADIENTS, k.LOSSES) == (
        "all",
        "default",
        "weights",
        "biases",
        "gradients",
        "losses",
    )
    assert (
        k.INPUTS,
        k.OUTPUTS,
        k.LAYERS,
        k.METRICS,
        k.SM_METRICS,
        k.OPTIMIZER_VARIABLES,
        k.TENSORFLOW_SUMMARIES,
    ) == (
        "inputs",
        "outputs",
        "layers",
        "metrics",
        "sm_metrics",
        "optimizer_variables",
        "tensorflow_summaries",
    )
    assert (
        k.HYPERPARAMETERS,
        k.PREDICTIONS,
        k.LABELS,
        k.FEATURE_IMPORTANCE,
        k.AVERAGE_SHAP,
        k.FULL_SHAP,
        k.TREES,
    ) == (
        "hyperparameters",
        "predictions",
        "labels",
        "feature_importance",
        "average_shap",
        "full_shap",
        "trees",
    )
    assert SCALAR_COLLECTIONS == {
        "losses",
        "metrics",
        "feature_importance",
        "average_shap",
        "sm_metrics",
    }
    assert SM_METRIC_COLLECTIONS == {"losses", "metrics", "sm_metrics"}
    assert NON_REDUCTION_COLLECTIONS == SCALAR_COLLECTIONS | {"tensorflow_summaries"}
    assert NON_HISTOGRAM_COLLECTIONS == NON_REDUCTION_COLLECTIONS
    assert DEFAULT_INCLUDE_COLLECTIONS == {
        "pytorch": ["losses"],
        "xgboost": ["metrics"],
        "tensorflow": ["metrics", "losses", "sm_metrics"],
    }


def test_builtin_regexes_exactly_smdebugs():
    assert builtin_collections("pytorch") == {
        "all": [],
        "default": [],
        "weights": ["^(?!gradient).*weight"],
        "biases": ["^(?!gradient).*bias"],
        "gradients": ["^gradient"],
        "losses": ["[Ll]oss_(?!input).*output"],
    }
    assert builtin_collections("xgboost") == {
        "all": [],
        "default": [],
        "hyperparameters": ["^hyperparameters/.*$"],
        "metrics": ["^[a-zA-z]+-[a-zA-z0-9]+$"],
        "losses": ["^[a-zA-z]+-.+(?<!(auc|map))$"],
        "predictions": ["^predictions$"],
        "labels": ["^labels$"],
        "feature_importance": ["^feature_importance/.*"],
        "average_shap": ["^average_shap/.*[^/bias]$"],
        "full_shap": ["^full_shap/.*[^/bias]$"],
        "trees": ["^trees/.*"],
    }
    tf = builtin_collections("TensorFlow")
    assert list(tf) == [
        "all",
        "default",
        "weights",
        "biases",
        "gradients",
        "losses",
        "metrics",
        "inputs",
        "outputs",
        "layers",
        "sm_metrics",
        "optimizer_variables",
    ]
    assert tf["biases"] == ["^(?!gradient).*bias"]
    assert all(v == [] for k, v in tf.items() if k != "biases")


def test_pytorch_extension_collections_are_opt_in():
    plain = builtin_collections("pytorch")
    ext = builtin_collections("pytorch", extensions=True)
    assert "inputs" not in plain and "outputs" not in plain
    assert list(ext) == list(plain) + ["inputs", "outputs"]
    assert ext["inputs"] == PYTORCH_EXTENSION_COLLECTIONS["inputs"] == [r".*_input_\d+$"]
    inputs = Collection("inputs", include_regex=ext["inputs"])
    outputs = Collection("outputs", include_regex=ext["outputs"])
    assert inputs.matches("Sequential_0_input_0") and not inputs.matches("Sequential_0_output_0")
    assert outputs.matches("fc1_output_12") and not outputs.matches("fc1_output_")
    assert builtin_collections("xgboost", extensions=True) == builtin_collections("xgboost")


@pytest.mark.parametrize(
    ("framework", "coll", "name", "expected"),
    [
        ("pytorch", "weights", "Sequential_0.weight", True),
        ("pytorch", "weights", "gradient/Sequential_0.weight", False),
        ("pytorch", "biases", "fc.bias", True),
        ("pytorch", "gradients", "gradient/fc.bias", True),
        ("pytorch", "losses", "CrossEntropyLoss_output_0", True),
        ("pytorch", "losses", "CrossEntropyLoss_input_0", False),
        ("xgboost", "metrics", "train-rmse", True),
        ("xgboost", "losses", "train-rmse", True),
        ("xgboost", "losses", "validation-auc", False),
        ("xgboost", "hyperparameters", "hyperparameters/max_depth", True),
        ("xgboost", "average_shap", "average_shap/f0", True),
        # smdebug's [^/bias] class drops any name ending in / b i a s (spec 4, kept on purpose)
        ("xgboost", "average_shap", "average_shap/area", False),
        ("xgboost", "full_shap", "full_shap/bias", False),
        ("tensorflow", "biases", "dense/bias", True),
    ],
)
def test_builtin_regex_behaviour(framework, coll, name, expected):
    c = CollectionManager(framework=framework).get(coll)
    assert c.matches(name) is expected


def test_unknown_framework():
    with pytest.raises(SMDebugValueError, match="mxnet"):
        builtin_collections("mxnet")


# -- CollectionManager -------------------------------------------------------------------------


def test_manager_creates_builtins_in_fixed_order():
    for fw in ("pytorch", "xgboost", "tensorflow"):
        cm = CollectionManager(framework=fw)
        assert list(cm.collections) == list(builtin_collections(fw))
        for name, regexes in builtin_collections(fw).items():
            assert cm.get(name).include_regex == regexes
    assert list(CollectionManager().collections) == ["all", "default"]
    assert len(CollectionManager(create_default=False)) == 0
    assert "inputs" in CollectionManager(framework="pytorch", extensions=True)


def test_builtin_order_does_not_depend_on_hash_seed():
    code = (
        "from smdebug_lite.config import CollectionManager;"
        "print(CollectionManager(framework='tensorflow').export())"
    )
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        outputs.add(out)
    assert len(outputs) == 1


def test_get_add_contains():
    cm = CollectionManager(framework="pytorch")
    with pytest.raises(CollectionNotFound) as info:
        cm.get("relu")
    assert isinstance(info.value, KeyError) and isinstance(info.value, SMDebugError)
    assert "relu" in str(info.value) and "weights" in str(info.value)
    relu = cm.get("relu", create_if_not_exists=True)
    assert cm.get("relu") is relu and "relu" in cm and relu in cm
    assert list(cm.collections)[-1] == "relu"  # user collections after built-ins
    assert cm.add("relu") is relu  # by name: kept
    new = Collection("relu", include_regex=["r"])
    cm.add(new)  # a Collection replaces
    assert cm.get("relu") is new and cm["relu"] is new
    cm.add(["x", Collection("y")])
    assert list(cm.collections)[-2:] == ["x", "y"]
    assert [c.name for c in cm] == list(cm.get_collections())
    with pytest.raises(SMDebugValueError, match="5"):
        cm.add(5)


def test_to_json_dict_and_export(tmp_path):
    cm = CollectionManager(framework="pytorch")
    d = cm.to_json_dict(4)
    assert list(d) == ["collections", "_meta"] and d["_meta"] == {"num_workers": 4}
    assert cm.to_json_dict()["_meta"] == {"num_workers": 1}
    target = tmp_path / "collections" / "000000000" / "worker_0_collections.json"
    text = cm.export(target, num_workers=2)
    assert target.read_text() == text == json.dumps(cm.to_json_dict(2))
    assert [p.name for p in target.parent.iterdir()] == ["worker_0_collections.json"]
    loaded = CollectionManager.load(target)
    assert loaded.num_workers == 2 and loaded.get_num_workers() == 2
    assert loaded.collections == cm.collections
    assert cm.export() == json.dumps(cm.to_json_dict())


@pytest.mark.parametrize("name", sorted(GOLDEN_FILES))
def test_golden_files_load_and_reexport_byte_identically(name):
    path = GOLDEN_FILES[name]
    original = path.read_text()
    cm = CollectionManager.load(path)
    assert cm.num_workers == 1
    assert cm.export() == original
    assert CollectionManager.load_from_string(original) == cm
    assert CollectionManager.load_from_string(original.encode()) == cm


def test_golden_pt_basic_content():
    cm = CollectionManager.load(GOLDEN_FILES["pt_basic"])
    assert set(cm.collections) == {"losses", "gradients", "weights", "biases", "default", "all"}
    losses = cm.get("losses")
    assert losses.tensor_names == {"CrossEntropyLoss_output_0"}
    assert losses.include_regex == ["[Ll]oss_(?!input).*output"]
    assert losses.save_histogram is False
    assert losses.reduction_config == ReductionConfig(save_raw_tensor=True)
    assert losses.save_config == SaveConfig(save_interval=1)
    assert cm.get("gradients").tensor_names == {
        "gradient/Sequential_0.bias",
        "gradient/Sequential_0.weight",
        "gradient/Sequential_2.bias",
        "gradient/Sequential_2.weight",
    }


def test_golden_pt_reductions_content():
    cm = CollectionManager.load(GOLDEN_FILES["pt_reductions"])
    w = cm.get("weights")
    assert w.reduction_config == ReductionConfig(
        reductions=["min", "max", "mean", "std", "variance", "sum", "prod"],
        abs_reductions=["mean"],
        norms=["l1", "l2"],
        abs_norms=["l2"],
        save_raw_tensor=False,
    )
    assert w.save_config == SaveConfig(save_interval=3, start_step=2)
    assert [s for s in range(12) if w.save_config.should_save_step(modes.TRAIN, s)] == [3, 6, 9]
    assert cm.get("losses").reduction_config == ReductionConfig(save_raw_tensor=True)


def test_loading_tolerates_unknown_keys_and_nulls():
    doc = {
        "collections": {
            "mine": {
                "name": "mine",
                "include_regex": ["a"],
                "tensor_names": [],
                "reduction_config": None,
                "save_config": None,
                "save_histogram": True,
                "extra": 1,
            },
            "noname": {"include_regex": ["b"]},
        },
        "_meta": {"num_workers": 3, "other": "x"},
        "future": {},
    }
    cm = CollectionManager.load_from_string(json.dumps(doc))
    assert cm.num_workers == 3
    assert cm.get("mine").reduction_config is None and cm.get("mine").save_config is None
    assert cm.get("noname").include_regex == ["b"]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("{not json", ["bad.json", "not valid JSON"]),
        ("[1, 2]", ["bad.json", "JSON object"]),
        ('{"_meta": {"num_workers": 1}}', ["bad.json", "'collections'"]),
        ('{"collections": {}}', ["bad.json", "'_meta'"]),
        ('{"collections": {}, "_meta": {}}', ["bad.json", "num_workers"]),
        ('{"collections": {}, "_meta": {"num_workers": 0}}', ["bad.json", "num_workers=0"]),
        ('{"collections": {}, "_meta": {"num_workers": "x"}}', ["bad.json", "'x'"]),
        ('{"collections": [], "_meta": {"num_workers": 1}}', ["bad.json", "'collections'"]),
        ('{"collections": {"a": 3}, "_meta": {"num_workers": 1}}', ["bad.json", "'a'", "3"]),
        (
            '{"collections": {"a": {"name": "b"}}, "_meta": {"num_workers": 1}}',
            ["bad.json", "'a'", "'b'"],
        ),
        (
            '{"collections": {"a": {"name": "a", "reduction_config": {"reductions": "median"}}},'
            ' "_meta": {"num_workers": 1}}',
            ["bad.json", "'a'", "median"],
        ),
    ],
)
def test_malformed_collections_files(tmp_path, text, needles):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SMDebugValueError) as info:
        CollectionManager.load(path)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_load_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        CollectionManager.load(tmp_path / "nope.json")


def test_non_utf8_collections_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b'{"collections": {"\xe9": {}}, "_meta": {"num_workers": 1}}')
    with pytest.raises(SMDebugValueError, match="UTF-8"):
        CollectionManager.load(path)


REF_LOAD = r"""
import json, sys
from smdebug.core.collection_manager import CollectionManager
cm = CollectionManager.load(sys.argv[1])
print(json.dumps({"num_workers": cm.get_num_workers(),
                  "collections": {n: c.to_json_dict() for n, c in cm.collections.items()}}))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_loads_our_collections_file(tmp_path):
    from refvenv import ref_python, run_ref

    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    cm = CollectionManager(framework="xgboost", num_workers=3)
    cm.get("metrics").save_config = {modes.TRAIN: SaveConfigMode(save_interval=2)}
    cm.get("trees").reduction_config = ReductionConfig(
        reductions=["max"], abs_norms=["l1"], save_shape=True
    )
    custom = cm.get("custom", create_if_not_exists=True)
    custom.include(["^x", "y$"])
    custom.add_tensor_name("b")
    custom.add_tensor_name("a")
    custom.save_config = SaveConfig(save_interval=3, start_step=1, end_step=30, save_steps=[7])
    custom.save_histogram = False
    path = tmp_path / "worker_0_collections.json"
    cm.export(path)
    proc = run_ref(REF_LOAD, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["num_workers"] == 3
    assert got["collections"] == cm.to_json_dict()["collections"]
