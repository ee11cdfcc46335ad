"""Built-in rule registry, documented defaults and parameter parsing."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from test_rules_helpers import Step, write_trial

from smdebug_lite.rules import Rule
from smdebug_lite.rules.builtin import BUILTIN_RULES, UnknownRuleError, get_builtin_rule
from smdebug_lite.rules.params import (
    parse_bool,
    parse_float,
    parse_int,
    parse_list,
    parse_regex_list,
    parse_str_list,
)
from smdebug_lite.trials import create_trial

DOCUMENTED = {
    "VanishingGradient": {"threshold": 1e-7},
    "ExplodingTensor": {"only_nan": False},
    "LossNotDecreasing": {"num_steps": 10, "diff_percent": 0.1, "increase_threshold_percent": 5.0,
                          "mode": None},
    "Overfit": {"start_step": 0, "patience": 1, "ratio_threshold": 0.1},
    "Overtraining": {"patience_train": 5, "patience_validation": 10, "delta": 0.01},
    "TensorVariance": {},
    "AllZero": {},
    "WeightUpdateRatio": {"num_steps": None, "large_threshold": 10.0, "small_threshold": 1e-8,
                          "epsilon": 1e-9},
    "UnchangedTensor": {"num_steps": 3, "rtol": 1e-5, "atol": 1e-8, "equal_nan": False},
    "PoorWeightInitialization": {"threshold": 10.0, "distribution_range": 0.001, "patience": 5,
                                 "steps": 10},
    "SaturatedActivation": {"threshold_inactivity": 1.0, "threshold_layer": 50.0,
                            "ranges": {"tanh": (-9.4999, 9.4999), "sigmoid": (-23.0, 16.99999)}},
    "DeadRelu": {"threshold_inactivity": 1.0, "threshold_layer": 50.0},
    "ClassImbalance": {"threshold_imbalance": 10.0, "threshold_misprediction": 0.7,
                       "samples": 500, "argmax": False},
    "CheckInputImages": {"threshold_mean": 0.2, "threshold_samples": 500, "channel": 1},
    "SimilarAcrossRuns": {},
    "StalledTrainingRule": {"threshold": 1800.0, "stop_training_on_fire": False},
    "NLPSequenceRatio": {"token_values": [0.0], "thresholds": [50.0]},
    "Confusion": {"category_no": None, "labels_name": "labels", "predictions_name": "predictions",
                  "min_diag": 0.9, "max_off_diag": 0.1},
    "FeatureImportanceOverweight": {"threshold": 0.8, "nfeatures": 3},
    "TreeDepth": {"depth": 4},
}
REQUIRED = {
    "TensorVariance": {"max_threshold": "1"},
    "AllZero": {"collection_names": "weights"},
}


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    out = tmp_path_factory.mktemp("t") / "run"
    return create_trial(write_trial(str(out), [Step(0, {"x": np.ones(3)})]))


def _make(name, trial, **kw):
    cls = get_builtin_rule(name)
    if name == "SimilarAcrossRuns":
        kw.setdefault("other_trials", [trial])
    return cls(trial, **{**REQUIRED.get(name, {}), **kw})


def test_registry_has_every_documented_rule():
    assert set(BUILTIN_RULES) == set(DOCUMENTED)
    for name, cls in BUILTIN_RULES.items():
        assert cls.__name__ == name and issubclass(cls, Rule)
        assert get_builtin_rule(name) is cls
        assert get_builtin_rule(name.lower()) is cls
    with pytest.raises(UnknownRuleError) as ei:
        get_builtin_rule("VanishingGradients")
    assert "valid names" in str(ei.value) and "VanishingGradient" in str(ei.value)
    assert isinstance(ei.value, KeyError)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_defaults(name, trial):
    rule = _make(name, trial)
    assert rule.rule_name == name
    for attr, value in DOCUMENTED[name].items():
        assert getattr(rule, attr) == value, attr


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_parameters_are_strings_and_documented(name):
    cls = BUILTIN_RULES[name]
    sig = inspect.signature(cls.__init__)
    params = [p for p in sig.parameters.values() if p.name not in ("self", "base_trial")]
    assert params and params[-1].name == "action_str"
    doc = cls.__doc__ or ""
    assert "Parameters" in doc and "Collections" in doc
    for p in params:
        if p.name in ("action_str", "other_trials"):
            continue
        assert p.default is None or isinstance(p.default, str), (p.name, p.default)
        assert p.name in doc, f"{name} docstring does not mention {p.name}"


BAD = [
    ("VanishingGradient", "threshold", "abc"),
    ("VanishingGradient", "threshold", "-1"),
    ("ExplodingTensor", "only_nan", "maybe"),
    ("ExplodingTensor", "tensor_regex", "grad(("),
    ("LossNotDecreasing", "num_steps", "10.5"),
    ("LossNotDecreasing", "diff_percent", "ten"),
    ("LossNotDecreasing", "mode", "TRAINING"),
    ("Overfit", "patience", "0"),
    ("Overtraining", "delta", "x"),
    ("TensorVariance", "min_threshold", "low"),
    ("AllZero", "threshold", "101"),
    ("WeightUpdateRatio", "num_steps", "two"),
    ("UnchangedTensor", "num_steps", "1"),
    ("UnchangedTensor", "equal_nan", "perhaps"),
    ("PoorWeightInitialization", "activation_inputs_regex", "[relu"),
    ("SaturatedActivation", "threshold_tanh_min", "10"),
    ("DeadRelu", "threshold_layer", "150"),
    ("ClassImbalance", "samples", "many"),
    ("CheckInputImages", "channel", "first"),
    ("StalledTrainingRule", "threshold", "soon"),
    ("NLPSequenceRatio", "token_thresholds_percent", "50,60"),
    ("NLPSequenceRatio", "token_values", "a,b"),
    ("Confusion", "category_no", "three"),
    ("FeatureImportanceOverweight", "nfeatures", "0"),
    ("TreeDepth", "depth", "deep"),
]


@pytest.mark.parametrize("name,param,value", BAD)
def test_bad_parameters_name_parameter_and_value(name, param, value, trial):
    with pytest.raises(ValueError) as ei:
        _make(name, trial, **{param: value})
    msg = str(ei.value)
    assert name in msg and (param in msg or "threshold_tanh" in msg) and value.split(",")[0] in msg


def test_rules_that_need_something_say_so(trial):
    with pytest.raises(ValueError, match="max_threshold"):
        get_builtin_rule("TensorVariance")(trial)
    with pytest.raises(ValueError, match="collection_names or tensor_regex"):
        get_builtin_rule("AllZero")(trial)
    with pytest.raises(ValueError, match="training_job_name_prefix"):
        get_builtin_rule("StalledTrainingRule")(trial, stop_training_on_fire="true")
    rule = get_builtin_rule("StalledTrainingRule")(trial, stop_training_on_fire="True",
                                                   training_job_name_prefix="Job-A")
    assert rule.actions.actions[0].training_job_prefix == "Job-A"


def test_param_helpers():
    assert parse_float("R", "p", " 1e-7 ") == 1e-7 and parse_float("R", "p", 3) == 3.0
    assert parse_float("R", "p", "None", allow_none=True) is None
    assert parse_int("R", "p", "10") == 10 and parse_int("R", "p", "10.0") == 10
    assert parse_bool("R", "p", "TRUE") is True and parse_bool("R", "p", "0") is False
    assert parse_str_list("R", "p", "a, b,,c") == ["a", "b", "c"]
    assert parse_str_list("R", "p", ["x"]) == ["x"] and parse_str_list("R", "p", None) == []
    assert [r.pattern for r in parse_regex_list("R", "p", ".*a,b$")] == [".*a", "b$"]
    assert parse_list("R", "p", "1, 2", float, "numbers") == [1.0, 2.0]
    for bad in ("nan", "", True):
        with pytest.raises(ValueError, match="R: parameter p="):
            parse_float("R", "p", bad)
