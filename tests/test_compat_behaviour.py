"""Edges of smdebug 1.0.34's public API, checked against the real smdebug in the reference venv:
parameter names of the public calls, `mode=None`, XGBoost's `full_shap` tensors, the error for a
reduction of a string tensor, and save configs of modes the user never set."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from refvenv import ref_python, run_ref
from torch import nn

from smdebug_lite import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugValueError, StepUnavailable, TensorNotReducible
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import StepState, create_trial


def _ref_or_skip() -> None:
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)


def _ref_json(code: str, *args: str) -> dict:
    proc = run_ref(code, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _torch_trial(out_dir: str, save_config) -> None:
    """A small real training with our hook: 6 TRAIN steps, then 4 EVAL steps."""
    from smdebug_lite.pytorch import Hook

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    hook = Hook(out_dir, save_config=save_config, include_collections=["weights", "losses"])
    hook.register_module(model)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for mode, n in ((ModeKeys.TRAIN, 6), (ModeKeys.EVAL, 4)):
        hook.set_mode(mode)
        for _ in range(n):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    hook.close()


# -- 1. parameter names of the public calls ----------------------------------------------------

_REF_SIGNATURES = r"""
import inspect, json, importlib, warnings
warnings.simplefilter("ignore")
targets = {
    "Trial": ("smdebug.trials.trial", "Trial"),
    "Tensor": ("smdebug.core.tensor", "Tensor"),
    "Collection": ("smdebug.core.collection", "Collection"),
    "CollectionManager": ("smdebug.core.collection_manager", "CollectionManager"),
    "SaveConfig": ("smdebug", "SaveConfig"),
    "SaveConfigMode": ("smdebug", "SaveConfigMode"),
    "ReductionConfig": ("smdebug", "ReductionConfig"),
    "Rule": ("smdebug.rules", "Rule"),
    "RequiredTensors": ("smdebug.rules.req_tensors", "RequiredTensors"),
    "invoke_rule": ("smdebug.rules", "invoke_rule"),
    "XGBoostHook": ("smdebug.xgboost", "Hook"),
}
out = {}
for key, (mod, name) in targets.items():
    obj = getattr(importlib.import_module(mod), name)
    members = {"__call__": obj} if not inspect.isclass(obj) else {
        n: m for n, m in inspect.getmembers(obj)
        if callable(m) and (not n.startswith("_") or n == "__init__")}
    out[key] = {n: [p for p in inspect.signature(m).parameters if p not in ("self", "cls")]
                for n, m in members.items()}
print(json.dumps(out))
"""

# Public names of smdebug 1.0.34 that are deliberately absent (docs/differences.md): the index
# loader's internals, and the hook-wide profiler/collection methods that the shared hook core
# has to provide for every framework.
_ABSENT = {
    ("Tensor", "add_step"), ("Tensor", "add_reduction_step"),
    ("XGBoostHook", "add_collection"), ("XGBoostHook", "export_collections"),
    ("XGBoostHook", "has_default_configuration"), ("XGBoostHook", "record_trace_events"),
    ("XGBoostHook", "log_outstanding_timeline_metrics"),
    ("XGBoostHook", "should_save_tensor_or_collection"),
}


def _ours() -> dict:
    from smdebug_lite import ReductionConfig
    from smdebug_lite.config.collection import Collection
    from smdebug_lite.config.collection_manager import CollectionManager
    from smdebug_lite.rules import Rule, invoke_rule
    from smdebug_lite.rules.required_tensors import RequiredTensors
    from smdebug_lite.trials import Tensor, Trial
    from smdebug_lite.xgboost import Hook as XGBoostHook

    return {"Trial": Trial, "Tensor": Tensor, "Collection": Collection,
            "CollectionManager": CollectionManager, "SaveConfig": SaveConfig,
            "SaveConfigMode": SaveConfigMode, "ReductionConfig": ReductionConfig, "Rule": Rule,
            "RequiredTensors": RequiredTensors, "invoke_rule": invoke_rule,
            "XGBoostHook": XGBoostHook}


def test_every_public_parameter_of_smdebug_is_accepted():
    import inspect

    _ref_or_skip()
    ref = _ref_json(_REF_SIGNATURES)
    ours = _ours()
    missing = []
    for key, methods in ref.items():
        for method, params in methods.items():
            if (key, method) in _ABSENT:
                continue
            obj = ours[key] if method == "__call__" else getattr(ours[key], method, None)
            if obj is None:
                missing.append(f"{key}.{method}")
                continue
            sig = inspect.signature(obj).parameters
            if any(p.kind is p.VAR_KEYWORD for p in sig.values()):
                continue
            missing += [f"{key}.{method}({p}=)" for p in params if p not in sig]
    assert not missing, missing


def test_smdebug_keywords_work(tmp_path):
    from smdebug_lite.config.collection import Collection
    from smdebug_lite.config.collection_manager import CollectionManager, CollectionNotFound

    c = Collection("c")
    c.include(t="relu")
    c.add_tensor_name(tname="a")
    assert c.has_tensor_name(tname="a") and c.include_regex == ["relu"]
    c.remove_tensor_name(tname="a")
    assert not c.has_tensor_name("a")
    cfg = SaveConfigMode(save_interval=3)
    assert cfg.should_save_step(step_num=6) and not cfg.should_save_step(step_num=7)
    sc = SaveConfig({ModeKeys.TRAIN: cfg})
    assert sc.should_save_step(mode=ModeKeys.TRAIN, step_num=9)
    sc.merge_default_save_config(default_save_config=SaveConfig(save_interval=5))
    assert sc.get_save_config(ModeKeys.EVAL).save_interval == 5

    cm = CollectionManager(create_default=False)
    assert cm.get("x", create=True).name == "x"
    with pytest.raises(CollectionNotFound):
        cm.get("y", create=False)
    cm.create_collection("z", cls=Collection)
    cm.update_meta({"num_workers": 2, "extra": "kept"})
    assert cm.get_num_workers() == 2 and cm.to_json_dict()["_meta"]["extra"] == "kept"
    cm.export(str(tmp_path), "worker_0_collections.json")
    path = tmp_path / "collections" / "000000000" / "worker_0_collections.json"
    back = CollectionManager.load(filename=str(path), collection_class=Collection)
    assert set(back.collections) == {"x", "z"} and back.num_workers == 2


# -- 1. mode=None, as smdebug answers it ----------------------------------------------------------

_REF_MODE_NONE = r"""
import json, sys
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
T = t.tensor(sys.argv[2])
out = {
    "steps": t.steps(mode=None), "steps_all": t.steps(None, show_incomplete_steps=True),
    "global_step": t.global_step(None, 0), "has_passed": t.has_passed_step(0, None).name,
    "tensor_steps": T.steps(mode=None), "prev_steps": T.prev_steps(4, n=None, mode=None),
    "values": sorted(T.values(mode=None, worker=None)),
    "refresh_tensor": t.refresh_tensor(sys.argv[2], steps=None),
}
for key, call in (("value", lambda: T.value(0, mode=None)),
                  ("reduction", lambda: T.reduction_value(0, "max", mode=None))):
    try:
        call()
        out[key] = "ok"
    except Exception as e:
        out[key] = type(e).__name__
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mode_none_means_a_mode_with_nothing_saved(tmp_path):
    out = str(tmp_path / "run")
    _torch_trial(out, SaveConfig(save_interval=2))
    trial = create_trial(out)
    name = trial.tensor_names(collection="weights")[0]
    tensor = trial.tensor(name)
    ours = {
        "steps": trial.steps(mode=None),
        "steps_all": trial.steps(None, show_incomplete_steps=True),
        "global_step": trial.global_step(None, 0),
        "has_passed": trial.has_passed_step(0, None).name,
        "tensor_steps": tensor.steps(mode=None),
        "prev_steps": tensor.prev_steps(4, n=None, mode=None),
        "values": sorted(tensor.values(mode=None, worker=None)),
        "refresh_tensor": trial.refresh_tensor(name, steps=None),
    }
    assert ours == {"steps": [], "steps_all": [], "global_step": None,
                    "has_passed": StepState.UNAVAILABLE.name, "tensor_steps": [],
                    "prev_steps": [], "values": [], "refresh_tensor": None}
    with pytest.raises(StepUnavailable, match="mode None"):
        tensor.value(0, mode=None)
    with pytest.raises(StepUnavailable):
        tensor.reduction_value(0, "max", mode=None)
    assert trial.tensor_names(mode=None) == [] and trial.inputs(0, mode=None) == []
    _ref_or_skip()
    ref = _ref_json(_REF_MODE_NONE, out, name)
    assert ref == {**ours, "value": "StepUnavailable", "reduction": "StepUnavailable"}


# -- 2. XGBoost full_shap: smdebug's name and shape ---------------------------------------------


@pytest.mark.slow
def test_full_shap_is_the_whole_contribution_matrix(tmp_path):
    import xgboost as xgb

    from smdebug_lite.xgboost import Hook

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    dtrain = xgb.DMatrix(x, label=(x[:, 0] > 0).astype(int), feature_names=["f0", "f1", "f2"])
    out = str(tmp_path / "xgb")
    hook = Hook(out, save_config=SaveConfig(save_interval=1), train_data=dtrain,
                include_collections=["full_shap", "average_shap"])
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2}, dtrain, 3,
                        callbacks=[hook])
    hook.close()
    trial = create_trial(out)
    assert trial.tensor_names(collection="full_shap") == ["full_shap/f0", "full_shap/f1",
                                                           "full_shap/f2"]
    for step in trial.steps():
        contribs = booster[: step + 1].predict(dtrain, pred_contribs=True)
        for f in ("f0", "f1", "f2"):
            full = trial.tensor(f"full_shap/{f}").value(step)
            assert full.shape == (60, 4)  # (rows, features + 1): the bias column last
            np.testing.assert_allclose(full, contribs, rtol=1e-6)
            np.testing.assert_allclose(full[:, :-1].sum(1) + full[:, -1],
                                       booster[: step + 1].predict(dtrain, output_margin=True),
                                       rtol=1e-5, atol=1e-5)
    _ref_or_skip()
    code = ("import json, sys\nfrom smdebug.trials import create_trial\n"
            "t = create_trial(sys.argv[1])\n"
            "print(json.dumps({n: list(t.tensor(n).value(2).shape) for n in "
            "t.tensor_names(collection='full_shap')}))")
    assert _ref_json(code, out) == {f"full_shap/{f}": [60, 4] for f in ("f0", "f1", "f2")}


# -- 3. reductions of tensors that have none -------------------------------------------------------


def _assert_not_reducible(exc: pytest.ExceptionInfo, tensor: str | None, reduction: str) -> None:
    assert isinstance(exc.value, TypeError) and isinstance(exc.value, SMDebugValueError)
    text = str(exc.value)
    assert reduction in text and (tensor is None or tensor in text)


def test_reduction_of_a_string_tensor_is_a_type_error_everywhere(tmp_path):
    import xgboost as xgb

    from smdebug_lite.config.reductions import compute_reduction
    from smdebug_lite.config.reductions import reduce_array as compute
    from smdebug_lite.pytorch.reductions import reduce_tensor
    from smdebug_lite.xgboost import Hook

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    dtrain = xgb.DMatrix(x, label=(x[:, 0] > 0).astype(int))
    out = str(tmp_path / "xgb")
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["trees"])
    xgb.train({"objective": "binary:logistic"}, dtrain, 2, callbacks=[hook])
    hook.close()
    feature = create_trial(out).tensor("trees/Feature")
    assert feature.value(0).dtype.kind == "U"
    for reduction, is_abs in (("max", False), ("mean", True), ("l2", False)):
        with pytest.raises(TypeError) as exc:
            feature.reduction_value(0, reduction, abs=is_abs)
        _assert_not_reducible(exc, "trees/Feature", reduction)
        assert str(feature.value(0).dtype) in str(exc.value)

    with pytest.raises(TensorNotReducible) as exc:
        compute_reduction("sum", np.array([b"x"]), tensor_name="b")
    _assert_not_reducible(exc, "b", "sum")
    with pytest.raises(TensorNotReducible) as exc:
        compute(np.array(["a", "b"]), "min", False, tensor_name="labels")
    _assert_not_reducible(exc, "labels", "min")
    with pytest.raises(TensorNotReducible) as exc:
        compute(np.array([object()], dtype=object), "mean", False)
    _assert_not_reducible(exc, None, "mean")
    with pytest.raises(TensorNotReducible) as exc:
        reduce_tensor(torch.ones(3, dtype=torch.float8_e4m3fn), "variance", False, "w8")
    _assert_not_reducible(exc, "w8", "variance")
    assert float(reduce_tensor(torch.ones(3), "sum", False)) == 3.0

    _ref_or_skip()  # smdebug raised numpy's TypeError (or ValueError for l2) here
    code = ("import json, sys\nfrom smdebug.trials import create_trial\n"
            "T = create_trial(sys.argv[1]).tensor('trees/Feature')\nout = {}\n"
            "for red in ('max', 'mean', 'sum'):\n"
            "    try:\n        T.reduction_value(0, red)\n        out[red] = 'ok'\n"
            "    except Exception as e:\n        out[red] = isinstance(e, TypeError)\n"
            "print(json.dumps(out))")
    assert _ref_json(code, out) == {"max": True, "mean": True, "sum": True}


def test_tensorflow_string_reduction():
    tf = pytest.importorskip("tensorflow")
    from smdebug_lite.tensorflow.reductions import tf_reductions

    with pytest.raises(TensorNotReducible) as exc:
        tf_reductions(tf.constant(["a", "b"]), [("max", False)], "tokens")
    _assert_not_reducible(exc, "tokens", "max")


# -- 4. save configs of modes never set ---------------------------------------------------------

_REF_WRITE = r"""
import sys, torch, torch.nn as nn
import smdebug.pytorch as smd
from smdebug import modes
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
cfg = smd.SaveConfig(mode_save_configs={modes.TRAIN: smd.SaveConfigMode(save_interval=2)})
hook = smd.Hook(out_dir=sys.argv[1], save_config=cfg, include_collections=["weights", "losses"])
hook.register_module(m)
lf = nn.CrossEntropyLoss()
hook.register_loss(lf)
hook.set_mode(modes.TRAIN)
for i in range(4):
    lf(m(torch.randn(8, 4)), torch.randint(0, 2, (8,))).backward()
hook.close()
"""

_REF_READ = r"""
import json, sys
from smdebug.trials import create_trial
from smdebug import modes
t = create_trial(sys.argv[1])
out = {}
for m in (modes.TRAIN, modes.EVAL, modes.GLOBAL):
    try:
        out[m.name] = t.collection("weights").save_config.get_save_config(m).save_interval
    except Exception as e:
        out[m.name] = type(e).__name__
print(json.dumps(out))
"""


def _collections_file(out_dir: str) -> dict:
    from pathlib import Path

    (path,) = Path(out_dir, "collections", "000000000").glob("*_collections.json")
    return json.loads(path.read_text())


def _read_modes(out_dir: str) -> dict:
    trial = create_trial(out_dir)
    out = {}
    for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL):
        try:
            out[m.name] = trial.collection("weights").save_config.get_save_config(m).save_interval
        except SMDebugValueError as e:
            assert "weights" in str(e) and m.name in str(e)
            out[m.name] = "SMDebugValueError"
    return out


@pytest.mark.slow
def test_unset_modes_are_null_in_the_file_and_an_error_when_read(tmp_path):
    ours = str(tmp_path / "ours")
    _torch_trial(ours, SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2)}))
    saved = _collections_file(ours)["collections"]
    for name in ("weights", "losses", "default"):
        assert saved[name]["save_config"]["TRAIN"]["save_interval"] == 2
        assert [saved[name]["save_config"][m] for m in ("EVAL", "PREDICT", "GLOBAL")] == [None] * 3
    expected = {"TRAIN": 2, "EVAL": "SMDebugValueError", "GLOBAL": "SMDebugValueError"}
    assert _read_modes(ours) == expected
    # A config built in code still answers with the default schedule.
    assert SaveConfig({ModeKeys.TRAIN: SaveConfigMode(2)}).get_save_config("eval").save_interval == 500

    _ref_or_skip()
    assert _ref_json(_REF_READ, ours) == expected  # smdebug reads what we write
    theirs = str(tmp_path / "theirs")
    proc = run_ref(_REF_WRITE, theirs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    their_file = _collections_file(theirs)["collections"]["weights"]["save_config"]
    assert their_file == saved["weights"]["save_config"]  # the same bytes of meaning
    assert _read_modes(theirs) == expected  # and we read what smdebug writes


def test_modes_the_user_set_are_written(tmp_path):
    out = str(tmp_path / "run")
    _torch_trial(out, SaveConfig(save_interval=3))
    saved = _collections_file(out)["collections"]["weights"]["save_config"]
    assert {m: c["save_interval"] for m, c in saved.items()} == {
        "TRAIN": 3, "EVAL": 3, "PREDICT": 3, "GLOBAL": 3}
    cfg = SaveConfig({ModeKeys.TRAIN: SaveConfigMode(2)})
    cfg.merge_default_save_config(None, SaveConfigMode(500))
    cfg.get_save_config(ModeKeys.EVAL).save_interval = 7  # edited: now the user's own
    assert cfg.to_json_dict()["EVAL"]["save_interval"] == 7
    assert cfg.to_json_dict()["PREDICT"] is None and cfg.copy().to_json_dict()["PREDICT"] is None
