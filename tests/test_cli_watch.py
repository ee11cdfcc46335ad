"""``smdebug-lite watch`` as a real subprocess beside a real PyTorch training process (a small
MLP with the PyTorch hook) writing the trial at the same time: a run that finishes, one that
trips a rule (with a webhook action to a local server), one that stops writing; and, in
process, an S3 trial, a trial that never appears and bad arguments."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GOLDEN_DIR
from test_s3_trial import upload_dir
from typer.testing import CliRunner
from webhook_server import webhook_server

from smdebug_lite.cli.app import build_app

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

TRAIN = r"""
import sys, time
import torch
from torch import nn
import smdebug_lite.pytorch as smd
from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.writer.non_finite import write_non_finite_record

out, steps, delay, end, nonfinite_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
    sys.argv[4], int(sys.argv[5])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=1),
                include_collections=["weights", "losses"])
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(smd.modes.TRAIN)
x = torch.randn(64, 8)
y = (x[:, 0] > 0).long()
for step in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if step == nonfinite_at:  # as a hook detecting non-finite values records it
        write_non_finite_record(out, NonFiniteRecord(
            step=step, mode="TRAIN", mode_step=step, worker="worker_0", phase="backward",
            module="2", tensor="2.weight", nan=4, posinf=0, neginf=0, wall_time=time.time()))
    time.sleep(delay)
print("trained", flush=True)
if end == "hang":  # stops writing without ending the trial
    time.sleep(600)
hook.close()
"""

RULES = """
from smdebug.rules import Rule


class StepAtLeast(Rule):
    def __init__(self, base_trial, at="8", action_str=None):
        super().__init__(base_trial, action_str)
        self.at = int(at)

    def invoke_at_step(self, step):
        if step >= self.at:
            self.report["Details"] = {"reason": f"step {step} reached {self.at}"}
            return True
        return False
"""


def start_training(tmp_path: Path, out: Path, steps: int, delay: float, end: str = "close",
                   nonfinite_at: int = -1) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    return subprocess.Popen([sys.executable, str(script), str(out), str(steps), str(delay), end,
                             str(nonfinite_at)], env=ENV, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def start_watch(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "smdebug_lite.cli", "watch", str(out),
                             "--plain", "--interval", "0.2", "--every", "1", *args], env=ENV, cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"did not end within {timeout}s:\n{out}\n{err}")
    return proc.returncode, out, err or ""


@pytest.mark.slow
def test_watch_a_run_to_its_end(tmp_path):
    out = tmp_path / "run"
    watch = start_watch(out, "--timeout", "90", "--rule", "LossNotDecreasing")  # before training
    train = start_training(tmp_path, out, steps=40, delay=0.1, nonfinite_at=5)
    code, text, err = finish(watch)
    assert finish(train)[0] == 0
    assert code == 0, text + err
    lines = text.splitlines()
    assert lines[0] == f"watching {out} (timeout 90s)"
    assert f"waiting for a trial at {out}" in lines and "trial opened" in lines
    progress = [line for line in lines if line.startswith("step ")]
    assert len(progress) >= 2 and all("workers worker_0 at" in line for line in progress)
    assert "steps/s" in progress[-1]
    assert "loss CrossEntropyLoss_output_0 = " in text
    assert ("first NaN/Inf: step 5 (TRAIN step 5), worker_0: backward in 2, tensor 2.weight "
            "(4 NaN, 0 +Inf, 0 -Inf)") in lines
    evaluating = [line for line in lines if line.startswith("rule LossNotDecreasing: InProgress")]
    assert len(evaluating) >= 2  # the evaluation progresses while steps arrive
    assert "training ended: step 39, 40 saved (TRAIN 40)" in lines
    assert "rule LossNotDecreasing: NoIssuesFound (40 steps evaluated, last step 39)" in lines
    assert lines[-1] == "exit code 0"
    assert "\x1b[" not in text  # no terminal control codes


def test_watch_a_run_that_trips_a_rule(tmp_path):
    out = tmp_path / "run"
    rules = tmp_path / "my_rules.py"
    rules.write_text(RULES)
    with webhook_server() as server:
        actions = tmp_path / "actions.json"
        actions.write_text(f'[{{"name": "webhook", "url": "{server.url}/hook/abcdef-secret"}}]')
        watch = start_watch(out, "--timeout", "90", "--rule", "StepAtLeast", "--rule-file",
                            str(rules), "-p", "at=8", "--action-json", f"@{actions}")
        train = start_training(tmp_path, out, steps=20, delay=0.1)
        code, text, err = finish(watch)
        assert finish(train)[0] == 0
        assert code == 1, text + err
        assert len(server.received) == 1
        body = server.received[0].json()
    assert "rule StepAtLeast found issues at step 8" in body["text"]
    assert "step 8 reached 8" in body["text"]
    lines = text.splitlines()
    tripped = [line for line in lines if line.startswith(
        "rule StepAtLeast: IssuesFound at step 8 (9 steps evaluated, last step 8): ")]
    assert tripped, text
    assert "training ended: step 19, 20 saved (TRAIN 20)" in lines
    assert lines[-1] == "exit code 1"
    assert "abcdef-secret" not in text + err


@pytest.mark.slow
def test_watch_a_run_that_stops_writing(tmp_path):
    out = tmp_path / "run"
    train = start_training(tmp_path, out, steps=6, delay=0.05, end="hang")
    try:
        deadline = time.monotonic() + 120
        while not any((out / "index").rglob("*.json")):  # the hook has written a step
            assert time.monotonic() < deadline and train.poll() is None
            time.sleep(0.2)
        started = time.monotonic()
        watch = start_watch(out, "--timeout", "4", "--rule", "LossNotDecreasing")
        code, text, err = finish(watch, timeout=120)
        took = time.monotonic() - started
    finally:
        train.kill()
        train.communicate()
    assert code == 2, text + err
    lines = text.splitlines()
    assert "trial opened" in lines and any(line.startswith("step ") for line in lines)
    timed_out = [line for line in lines if line.startswith("timed out: nothing new for 4s")]
    assert timed_out and "no end of training" in timed_out[0]
    assert any(line.startswith("rule LossNotDecreasing: ") for line in lines[-3:])
    assert lines[-1] == "exit code 2"
    assert took < 60


def test_watch_s3_and_missing_trials(s3_endpoint, s3_bucket):
    app = build_app()
    uri = upload_dir(s3_endpoint.client(), GOLDEN_DIR / "pt_basic", s3_bucket, "runs/w")
    r = CliRunner().invoke(app, ["watch", uri, "--interval", "0.1", "--timeout", "30",
                                 "--rule", "LossNotDecreasing"])
    assert r.exit_code == 0, r.output
    assert "training ended: step 24, 25 saved (TRAIN 20, EVAL 5)" in r.stdout
    assert "rule LossNotDecreasing: NoIssuesFound" in r.stdout

    r = CliRunner().invoke(app, ["watch", f"s3://{s3_bucket}/not/there", "--interval", "0.1",
                                 "--timeout", "0.5"])
    assert r.exit_code == 2
    assert f"timed out: no trial appeared at s3://{s3_bucket}/not/there within 0.5s" in r.stdout


def test_watch_refuses_bad_arguments(tmp_path):
    app = build_app()
    r = CliRunner().invoke(app, ["watch", str(tmp_path), "--rule", "NoSuchRule"])
    assert r.exit_code == 2 and "unknown built-in rule 'NoSuchRule'" in r.output
    r = CliRunner().invoke(app, ["watch", str(tmp_path), "--rule", "LossNotDecreasing",
                                 "-p", "threshold"])
    assert r.exit_code == 2 and "KEY=VALUE" in r.output
    r = CliRunner().invoke(app, ["watch", str(tmp_path), "--action-json",
                                 f"@{tmp_path / 'missing.json'}"])
    assert r.exit_code == 2 and "cannot read the file" in r.output
