"""Real smdebug 1.0.34 (reference venv) reads an XGBoost run written by our hook: names,
collections, steps and values, the same as our own reader."""

from __future__ import annotations

import json

import numpy as np
import pytest
from lazy_module import lazy, require_module
from refvenv import ref_python, run_ref

from smdebug_lite.hooks import singleton
from smdebug_lite.trials import create_trial

require_module("xgboost")
xgb = lazy("xgboost")
smd_xgb = lazy("smdebug_lite.xgboost")

READER = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
out = {"steps": t.steps(), "collections": {}, "values": {}}
for name, c in t.collections().items():
    out["collections"][name] = sorted(c.tensor_names)
for n in t.tensor_names():
    for s in t.tensor(n).steps():
        v = t.tensor(n).value(s)
        out["values"][f"{n}@{s}"] = [v.tolist(), str(v.dtype)]
print(json.dumps(out))
"""

COLLECTIONS = ["hyperparameters", "metrics", "losses", "predictions", "labels",
               "feature_importance", "trees", "full_shap", "average_shap"]


@pytest.mark.reference
def test_smdebug_1_0_34_reads_an_xgboost_run(tmp_path):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    singleton.del_hook()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    d = xgb.DMatrix(x, label=y)
    params = {"objective": "binary:logistic", "max_depth": 3, "eval_metric": ["logloss", "auc"]}
    out = tmp_path / "xgb"
    hook = smd_xgb.Hook(str(out), save_config=smd_xgb.SaveConfig(save_interval=3), include_collections=COLLECTIONS,
                hyperparameters=params, train_data=d, validation_data=d)
    xgb.train(params, d, 7, evals=[(d, "train")], callbacks=[hook], verbose_eval=False)
    hook.close()

    proc = run_ref(READER, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(str(out))
    assert got["steps"] == ours.steps() == [0, 3, 6]
    for name in COLLECTIONS:
        assert got["collections"][name] == sorted(ours.collection(name).tensor_names), name
        assert got["collections"][name], name
    expected = {f"{n}@{s}": ours.tensor(n).value(s)
                for n in ours.tensor_names() for s in ours.tensor(n).steps()}
    assert set(got["values"]) == set(expected)
    for key, value in expected.items():
        their, dtype = got["values"][key]
        if value.dtype.kind in "US":
            assert their == value.tolist(), key
        else:
            np.testing.assert_array_equal(np.asarray(their, dtype=value.dtype), value, key)
            assert dtype == str(value.dtype), key
