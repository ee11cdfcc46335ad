"""The launcher runs an unmodified XGBoost script (xgboost.train and the sklearn API) and the
hook from the DebugHookConfig JSON saves what the JSON asks for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lazy_module import require_module

require_module("xgboost")

from hook_config_files import write_hook_config  # noqa: E402

from smdebug_lite.trials import create_trial  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import xgboost as xgb

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    dtrain = xgb.DMatrix(x[:150], label=y[:150])
    dval = xgb.DMatrix(x[150:], label=y[150:])
    result = {}
    if sys.argv[1] == "train":
        xgb.train({"objective": "binary:logistic", "max_depth": 2}, dtrain, 12,
                  evals=[(dtrain, "train"), (dval, "validation")], evals_result=result,
                  verbose_eval=False)
    else:
        model = xgb.XGBClassifier(n_estimators=12, max_depth=2)
        model.fit(x[:150], y[:150], eval_set=[(x[150:], y[150:])], verbose=False)
        result = model.evals_result()
    print("RESULT", json.dumps(result))
""")


@pytest.mark.parametrize("api", ["train", "sklearn"])
def test_unmodified_xgboost_script(tmp_path, api):
    out = tmp_path / "tensors"
    config = write_hook_config(tmp_path, out, {
        "metrics": None, "predictions": None, "labels": None, "feature_importance": None,
        "average_shap": None, "hyperparameters": {"save_steps": "0", "end_step": "1"},
    })
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("USE_SMDEBUG", "TRAINING_JOB_NAME")}
    env.update(PYTHONPATH=str(REPO), SMDEBUG_CONFIG_FILE_PATH=str(config))
    proc = subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", "train.py", api],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    trial = create_trial(str(out))
    assert trial.steps() == [0, 10]  # XGBoost's default interval
    for eval_name, metrics in result.items():
        for metric, history in metrics.items():
            name = f"{eval_name}-{metric}"
            assert trial.tensor(name).values() == {0: [history[0]], 10: [history[10]]} or all(
                abs(trial.tensor(name).value(s)[0] - history[s]) < 1e-12 for s in (0, 10)), name
    assert trial.tensor("labels").value(0).shape == (50,)  # the evaluation set, not the training set
    assert trial.tensor("predictions").value(10).shape == (50,)
    assert trial.tensor("average_shap/f0").steps() == [0, 10]  # from the training DMatrix
    assert trial.tensor("feature_importance/gain/f0").steps() == [0, 10]
    if api == "train":
        assert trial.tensor("hyperparameters/max_depth").value(0).tolist() == [2]
        assert trial.tensor("hyperparameters/max_depth").steps() == [0]
