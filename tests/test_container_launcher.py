"""The zero-code-change launcher on unmodified training scripts, as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _pytorch_support import read_out_dir, steps_of
from hook_config_files import write_hook_config

pytestmark = pytest.mark.container

REPO = Path(__file__).resolve().parents[1]

TRAIN_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    def main():
        model = Net()
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(int(sys.argv[1])):
            opt.zero_grad()
            loss = loss_fn(model(torch.randn(5, 4)), torch.randint(0, 3, (5,)))
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for _ in range(3):
                loss_fn(model(torch.randn(5, 4)), torch.randint(0, 3, (5,)))
        print("TRAINING DONE", sys.argv[1:])
        sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)

    if __name__ == "__main__":
        main()
""")


def _sdk_config(tmp_path: Path, out: Path) -> Path:
    """DebugHookConfig JSON as the SageMaker Python SDK sends it (PascalCase request dict)."""
    debugger = pytest.importorskip("sagemaker.core.debugger")
    cfg = debugger.DebuggerHookConfig(
        s3_output_path="s3://bucket/debug-output",
        container_local_output_path=str(out),
        hook_parameters={"save_interval": "2", "eval.save_interval": "1"},
        collection_configs=[
            debugger.CollectionConfig(name="weights"),
            debugger.CollectionConfig(name="gradients", parameters={"train.save_interval": "1"}),
            debugger.CollectionConfig(name="relu_outputs", parameters={"include_regex": "act_output_0"}),
        ],
    )
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(cfg._to_request_dict()))
    return path


def _launch(tmp_path: Path, *args: str, env: dict | None = None, script: str = TRAIN_SCRIPT):
    script_path = tmp_path / "train.py"
    script_path.write_text(script)
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("SMDEBUG_CONFIG_FILE_PATH", "USE_SMDEBUG", "TRAINING_JOB_NAME")}
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", str(script_path),
                           *args],
                          capture_output=True, text=True, cwd=tmp_path, env=full_env, timeout=300)


def test_sdk_config_drives_unmodified_script(tmp_path):
    out = tmp_path / "tensors"
    config = _sdk_config(tmp_path, out)
    proc = _launch(tmp_path, "5", env={"SMDEBUG_CONFIG_FILE_PATH": str(config)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TRAINING DONE ['5']" in proc.stdout
    data = read_out_dir(out)
    assert steps_of(data, "Net_fc1.weight", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "Net_fc1.weight", "EVAL") == [0, 1, 2]
    assert steps_of(data, "gradient/Net_fc1.weight", "TRAIN") == [0, 1, 2, 3, 4]
    assert steps_of(data, "gradient/Net_fc1.weight", "EVAL") == []
    assert steps_of(data, "act_output_0", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "CrossEntropyLoss_output_0", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "CrossEntropyLoss_output_0", "EVAL") == [0, 1, 2]
    assert (out / "training_job_end.ts").exists()
    assert json.loads((out / "collections/000000000/worker_0_collections.json").read_text())[
        "collections"]["relu_outputs"]["tensor_names"] == ["act_output_0"]


def test_use_smdebug_off_runs_plain(tmp_path):
    out = tmp_path / "tensors"
    config = _sdk_config(tmp_path, out)
    proc = _launch(tmp_path, "2", env={"SMDEBUG_CONFIG_FILE_PATH": str(config), "USE_SMDEBUG": "0"})
    assert proc.returncode == 0, proc.stderr
    assert "TRAINING DONE" in proc.stdout and not out.exists()


def test_bad_config_reports_key_and_value_and_training_runs(tmp_path):
    out = tmp_path / "tensors"
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"LocalPath": str(out), "HookParameters": {"save_interval": "2"},
                                  "CollectionConfigurations": [
                                      {"CollectionName": "weights",
                                       "CollectionParameters": {"reductions": "mean,median_norm"}}]}))
    proc = _launch(tmp_path, "2", env={"SMDEBUG_CONFIG_FILE_PATH": str(config)})
    assert proc.returncode == 0, proc.stderr
    assert "TRAINING DONE" in proc.stdout
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert "reductions" in errors[0] and "mean,median_norm" in errors[0]
    assert not out.exists()


def test_no_config_exit_code_and_no_framework_import(tmp_path):
    script = "import sys\nprint('TORCH LOADED', 'torch' in sys.modules)\nsys.exit(3)\n"
    out = tmp_path / "tensors"
    config = _sdk_config(tmp_path, out)
    proc = _launch(tmp_path, env={"SMDEBUG_CONFIG_FILE_PATH": str(config)}, script=script)
    assert proc.returncode == 3
    assert "TORCH LOADED False" in proc.stdout  # the launcher imports no framework itself
    proc = _launch(tmp_path, "1", "4", env={"SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "none.json")})
    assert proc.returncode == 4 and "TRAINING DONE" in proc.stdout


CHECKPOINTED_SCRIPT = textwrap.dedent("""
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            return self.head(checkpoint(self.block, x, use_reentrant=False))

    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(6):
        opt.zero_grad()
        out = checkpoint(model, torch.randn(5, 4), use_reentrant=False)
        loss_fn(out, torch.randint(0, 3, (5,))).backward()
        opt.step()
    print("TRAINING DONE")
""")


def test_activation_checkpointing_under_the_launcher(tmp_path):
    """The backward pass computes checkpointed parts again (here the whole model, and a block
    inside it): discovery registers nothing more, and they are no steps and no new outputs."""
    out = tmp_path / "tensors"
    config = write_hook_config(tmp_path, out, {
        "weights": None, "losses": None, "relu_outputs": {"include_regex": r"block\.1_output_\d+"},
    }, hook_parameters={"save_interval": "2"})
    proc = _launch(tmp_path, env={"SMDEBUG_CONFIG_FILE_PATH": str(config)}, script=CHECKPOINTED_SCRIPT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TRAINING DONE" in proc.stdout
    assert proc.stdout.count("registered model") == 1, proc.stdout
    data = read_out_dir(out)
    assert steps_of(data, "Net_block.0.weight", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "block.1_output_0", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "CrossEntropyLoss_output_0", "TRAIN") == [0, 2, 4]
    assert not any(n.endswith("_1") for d in data.values() for n in d.tensors)


@pytest.mark.parametrize(("args", "code"), [(["--help"], 0), (["-h"], 0), ([], 2), (["-m"], 2)])
def test_usage_on_help_and_on_missing_arguments(args, code):
    from smdebug_lite.container.train import USAGE

    proc = subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", *args],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert (proc.stdout if code == 0 else proc.stderr).strip() == USAGE
