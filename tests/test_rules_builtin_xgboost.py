"""XGBoost built-in rules (TreeDepth, FeatureImportanceOverweight) on real boosting runs saved by
our XGBoost hook."""

from __future__ import annotations

import numpy as np
from lazy_module import lazy, require_module

from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import FeatureImportanceOverweight, TreeDepth
from smdebug_lite.rules.builtin.xgboost import tree_depths
from smdebug_lite.trials import create_trial

require_module("xgboost")
xgb = lazy("xgboost")


def _train(out_dir, x, y, rounds=4, **params):
    from smdebug_lite.xgboost import Hook, SaveConfig

    hook = Hook(out_dir, save_config=SaveConfig(save_interval=1),
                include_collections=["feature_importance", "trees", "metrics"])
    dtrain = xgb.DMatrix(x, label=y)
    booster = xgb.train({"objective": "reg:squarederror", "nthread": 1, "eta": 0.3,
                         "seed": 0, **params}, dtrain, num_boost_round=rounds,
                        evals=[(dtrain, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    return booster, create_trial(out_dir, timeout=30)


def _data(n=400, d=10, seed=0, informative=None, noise=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    w = np.zeros(d)
    w[: informative or d] = 1.0
    return x, x @ w + 0.5 * np.sin(3 * x[:, 0]) + noise * rng.normal(size=n)


def _depths(booster):
    """Depth per tree from xgboost's own table, and xgboost's own dump as a cross-check."""
    df = booster.trees_to_dataframe()
    return tree_depths(df["Tree"].values, df["Node"].values, [str(v) for v in df["Yes"]],
                       [str(v) for v in df["No"]])


def test_tree_depth_deep_vs_shallow(tmp_path):
    x, y = _data()
    booster, trial = _train(str(tmp_path / "deep"), x, y, max_depth=6)
    depths = _depths(booster)
    assert depths[0] == 6  # the tree table of xgboost itself gives the same depth
    res = invoke_rule(TreeDepth(trial))
    assert (res.status, res.step) == ("IssuesFound", 0)
    res = invoke_rule(TreeDepth(trial, depth="6"))
    assert res.status == "NoIssuesFound" and res.steps_evaluated == 4

    _, trial = _train(str(tmp_path / "shallow"), x, y, max_depth=3)
    assert invoke_rule(TreeDepth(trial)).status == "NoIssuesFound"


def test_feature_importance_overweight(tmp_path):
    x, y = _data(informative=1, noise=0.5)  # only feature 0 matters; the rest fit noise
    _, trial = _train(str(tmp_path / "one"), x, y, max_depth=3)
    assert len(trial.tensor_names(regex="feature_importance/weight")) > 3
    res = invoke_rule(FeatureImportanceOverweight(trial))
    assert (res.status, res.step) == ("IssuesFound", 0)

    x, y = _data()  # every feature matters equally
    _, trial = _train(str(tmp_path / "all"), x, y, max_depth=3, rounds=6)
    shares = sorted((float(trial.tensor(n).value(5)[0])
                     for n in trial.tensor_names(regex="feature_importance/weight")),
                    reverse=True)
    assert sum(shares[:3]) / sum(shares) < 0.8
    res = invoke_rule(FeatureImportanceOverweight(trial), start_step=5)
    assert res.status == "NoIssuesFound" and res.steps_evaluated == 1
