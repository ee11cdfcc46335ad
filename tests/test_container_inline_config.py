"""The launcher without a DebugHookConfig file: the hook configured inline, from the
SMDEBUG_HOOK_CONFIG environment variable or the smdebug_hook_config hyperparameter, as plain
training jobs (no Debugger fields) and ``docker run`` give it. Real subprocesses, real training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from smdebug_lite.trials import create_trial

pytestmark = pytest.mark.container

REPO = Path(__file__).resolve().parents[1]

# Unmodified, and strict about its arguments: a hyperparameter meant for the launcher that
# reached the script would make argparse fail.
SCRIPT = textwrap.dedent("""
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    steps = parser.parse_args().steps
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(torch.randn(6, 4)), torch.randint(0, 2, (6,))).backward()
        opt.step()
    print("TRAINED", steps)
""")


def hook_config(out_dir: Path | str) -> dict:
    return {
        "LocalPath": str(out_dir),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": "gradients"},
                                     {"CollectionName": "losses"}],
    }


def run(tmp_path: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / "train.py").write_text(SCRIPT)
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("USE_SMDEBUG", "TRAINING_JOB_NAME", "SMDEBUG_HOOK_CONFIG")}
    full_env.update({"PYTHONPATH": str(REPO), "SM_OPT_ML": str(tmp_path),
                     "SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "input/config/none.json"), **env})
    return subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", *args],
                          cwd=tmp_path, env=full_env, capture_output=True, text=True,
                          timeout=300)


def assert_trial(out_dir: Path | str) -> None:
    trial = create_trial(str(out_dir))
    assert trial.steps() == [0, 2, 4]
    assert len(trial.tensor_names(collection="gradients")) == 4
    assert trial.tensor_names(collection="losses")


def test_environment_variable_configures_the_hook_writing_to_s3(
        tmp_path: Path, s3_endpoint, s3_bucket: str) -> None:
    """Without DebugHookConfig nothing uploads /opt/ml/output/tensors: the hook writes to S3."""
    out = f"s3://{s3_bucket}/my-job/debug-output"
    proc = run(tmp_path, ["code/train.py", "--steps", "6"],
               {"SMDEBUG_HOOK_CONFIG": json.dumps(hook_config(out))})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "using the one in the environment variable SMDEBUG_HOOK_CONFIG" in proc.stdout + proc.stderr
    assert_trial(out)


def test_hyperparameter_configures_the_hook_and_is_not_passed_on(tmp_path: Path) -> None:
    """hyperparameters.json as a SageMaker framework estimator writes it: every value
    JSON-encoded, so the config object arrives as text inside text."""
    out = tmp_path / "tensors"
    (tmp_path / "input/config").mkdir(parents=True)
    (tmp_path / "input/config/hyperparameters.json").write_text(json.dumps({
        "sagemaker_program": json.dumps("train.py"),
        "smdebug_hook_config": json.dumps(json.dumps(hook_config(out))),
        "steps": json.dumps(6),
    }))
    proc = run(tmp_path, ["train"], {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TRAINED 6" in proc.stdout
    assert "using the one in the hyperparameter smdebug_hook_config" in proc.stdout + proc.stderr
    assert_trial(out)


def test_a_config_file_wins_over_the_inline_config(tmp_path: Path) -> None:
    from_file, inline = tmp_path / "from_file", tmp_path / "inline"
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps(hook_config(from_file)))
    proc = run(tmp_path, ["code/train.py", "--steps", "6"],
               {"SMDEBUG_CONFIG_FILE_PATH": str(config),
                "SMDEBUG_HOOK_CONFIG": json.dumps(hook_config(inline))})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_trial(from_file)
    assert not inline.exists()


def test_unusable_inline_config_is_reported_once_and_training_runs(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    bad_value = {**hook_config(out), "HookParameters": {"save_interval": "often"}}
    for value, expected in [("{not json", "environment variable SMDEBUG_HOOK_CONFIG: expected a "
                                          "DebugHookConfig JSON object, got text that is not JSON"),
                            ("[1, 2]", "got list"),
                            (json.dumps(bad_value), "often")]:
        proc = run(tmp_path, ["code/train.py", "--steps", "2"], {"SMDEBUG_HOOK_CONFIG": value})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "TRAINED 2" in proc.stdout
        log = proc.stdout + proc.stderr
        errors = [ln for ln in log.splitlines() if "smdebug-lite is off" in ln]
        assert len(errors) == 1 and expected in errors[0], log
        assert "SMDEBUG_HOOK_CONFIG" in errors[0]
        assert not out.exists()
