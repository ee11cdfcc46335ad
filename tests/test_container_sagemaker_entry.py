"""`smdebug-train train` (how SageMaker starts a training image) runs the job's entry script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.container

SCRIPT = """
import sys, json
print("ARGS " + json.dumps(sys.argv[1:]))
"""


def run_train(opt_ml: Path, env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, SM_OPT_ML=str(opt_ml), PYTHONPATH=str(REPO),
               SMDEBUG_CONFIG_FILE_PATH=str(opt_ml / "input/config/none.json"), **env_extra)
    return subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", "train"],
                          cwd=str(opt_ml), env=env, capture_output=True, text=True, timeout=120)


def test_train_runs_the_entry_point_with_hyperparameters(tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code/entry.py").write_text(SCRIPT)
    (tmp_path / "input/config").mkdir(parents=True)
    (tmp_path / "input/config/hyperparameters.json").write_text(json.dumps(
        {"sagemaker_program": '"entry.py"', "epochs": "3", "lr": "0.1", "name": '"run-a"'}))
    proc = run_train(tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("ARGS ")][0]
    assert json.loads(line[5:]) == ["--epochs", "3", "--lr", "0.1", "--name", "run-a"]


def test_train_without_an_entry_point_is_a_clear_error(tmp_path):
    proc = run_train(tmp_path, {})
    assert proc.returncode == 2
    assert "SAGEMAKER_PROGRAM" in proc.stderr


def test_train_with_a_missing_script_names_it(tmp_path):
    proc = run_train(tmp_path, {"SAGEMAKER_PROGRAM": "nope.py"})
    assert proc.returncode == 2
    assert "nope.py" in proc.stderr
