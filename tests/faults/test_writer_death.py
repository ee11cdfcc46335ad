"""The writer process dies mid-run (kill -9 of the writer child): real PyTorch training in a
subprocess goes on, every step is saved (the steps the dead writer had not acknowledged are
handed over again), the run ends with its end marker, and one warning names the cause. A script
that restores SIGPIPE's default action is not killed by writing to the dead writer's socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
if not os.path.exists("/proc/self/task"):
    pytest.skip("finds the writer child through /proc (Linux)", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]

# argv: out_dir, save_interval, step at which to kill the writer ("-1": never), "sigpipe" to
# restore SIGPIPE's default action, "twice" to kill the replacement too.
SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    import torch
    from torch import nn
    import smdebug_lite.pytorch as smd
    from smdebug_lite.storage import open_storage
    from smdebug_lite.trials import create_trial

    out, interval, kill_at, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    if "sigpipe" in flags:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    def read_proc(path):  # empty once its thread or process ended (listed, then gone)
        try:
            with open(path, "rb") as f:
                return f.read()
        except (FileNotFoundError, ProcessLookupError):
            return b""

    def writer_children():
        kids = []
        for task in os.listdir("/proc/self/task"):
            kids += map(int, read_proc(f"/proc/self/task/{task}/children").split())
        return [pid for pid in kids
                if b"smdebug_lite.writer.process.main" in read_proc(f"/proc/{pid}/cmdline")]

    def kill_writer():
        (pid,) = [p for p in writer_children() if p == hook.trial_writer.pid]
        os.kill(pid, signal.SIGKILL)
        for _ in range(2000):  # until only a zombie is left: its end of the socket is closed
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return pid
            time.sleep(0.005)
        raise SystemExit(f"the writer process {pid} did not die")

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    weights, killed = {}, []
    for step in range(60):
        weights[step] = model[0].weight.detach().clone().numpy()
        opt.zero_grad()
        loss = loss_fn(model(torch.randn(16, 32)), torch.randint(0, 4, (16,)))
        # (the forward pass just handed the step before to the writer: likely not written yet)
        if step == kill_at or (step == kill_at + 20 and "twice" in flags):
            killed.append(kill_writer())
        loss.backward()
        opt.step()
    hook.close()
    trial = create_trial(out)
    steps = trial.steps()
    exact = all((trial.tensor("Sequential_0.weight").value(s) == weights[s]).all() for s in steps)
    print("@@RESULT@@" + json.dumps({
        "steps": steps, "exact": bool(exact), "disabled": hook.disabled, "killed": killed,
        "writer_pid": hook.trial_writer.pid, "children": writer_children(),
        "end_marker": open_storage(out).exists("training_job_end.ts")}))
""")


def _train(tmp_path: Path, *args: str, out: str | None = None, env: dict | None = None,
           ) -> tuple[dict, list[str], subprocess.CompletedProcess]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path), "SMDEBUG_WRITER": "process", "TMPDIR": str(tmp_path),
           **(env or {})}
    proc = subprocess.run([sys.executable, str(script), out or str(tmp_path / "run"), *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    output = proc.stdout + proc.stderr  # (the library logs to stdout)
    result = json.loads(proc.stdout.split("@@RESULT@@")[1]) if "@@RESULT@@" in proc.stdout else {}
    return result, output.splitlines(), proc


def _reports(lines: list[str]) -> tuple[list[str], list[str]]:
    return ([line for line in lines if " WARNING " in line and "writer process" in line],
            [line for line in lines if " ERROR " in line or "Traceback" in line])


@pytest.mark.parametrize("interval", [1, pytest.param(5, marks=pytest.mark.slow)])
def test_a_killed_writer_process_loses_no_step(tmp_path, interval):
    result, lines, proc = _train(tmp_path, str(interval), "23")
    assert proc.returncode == 0, "\n".join(lines[-40:])
    assert len(result["killed"]) == 1 and not result["disabled"]
    # Training went on to the end, and every step it saved is there, exact.
    assert result["steps"] == list(range(0, 60, interval)), result["steps"]
    assert result["exact"] and result["end_marker"]
    # A new writer process took over (the dead one is no child any more).
    assert result["writer_pid"] not in result["killed"]
    assert result["children"] == [result["writer_pid"]]
    warnings, errors = _reports(lines)
    assert errors == [], errors
    assert len(warnings) == 1, warnings
    assert (f"writer process (pid {result['killed'][0]}) was killed by SIGKILL" in warnings[0]
            and "a new writer process" in warnings[0] and "no step is lost" in warnings[0])


@pytest.mark.slow
def test_steps_staged_for_s3_by_a_killed_writer_process_are_uploaded(tmp_path, s3_endpoint):
    """For S3 a step is acknowledged once staged locally: what the dead writer had staged and
    not uploaded is uploaded by the writer that takes over."""
    bucket = s3_endpoint.new_bucket()
    result, lines, proc = _train(tmp_path, "1", "20", out=f"s3://{bucket}/run",
                                 env=s3_endpoint.env)
    assert proc.returncode == 0, "\n".join(lines[-40:])
    assert result["steps"] == list(range(60)) and result["exact"] and result["end_marker"]
    warnings, errors = _reports(lines)
    assert errors == [] and len(warnings) == 1, (errors, warnings)
    assert [p.name for p in tmp_path.glob("smdebug-lite-staging-*")] == []  # all uploaded


@pytest.mark.slow
def test_after_a_second_death_a_thread_writes_the_rest(tmp_path):
    result, lines, proc = _train(tmp_path, "2", "11", "twice")
    assert proc.returncode == 0, "\n".join(lines[-40:])
    assert len(result["killed"]) == 2 and not result["disabled"]
    assert result["steps"] == list(range(0, 60, 2)) and result["exact"] and result["end_marker"]
    assert result["writer_pid"] is None and result["children"] == []
    warnings, errors = _reports(lines)
    assert errors == [], errors
    assert len(warnings) == 2, warnings
    assert "a thread of the training process" in warnings[1] and "no step is lost" in warnings[1]


@pytest.mark.parametrize("interval", [1, 10])
@pytest.mark.slow
def test_sigpipe_restored_to_its_default_does_not_kill_training(tmp_path, interval):
    """Without MSG_NOSIGNAL, the first message to the dead writer's socket would kill the
    training process with SIGPIPE."""
    result, lines, proc = _train(tmp_path, str(interval), "25", "sigpipe")
    assert proc.returncode == 0, (proc.returncode, "\n".join(lines[-40:]))
    assert result["steps"] == list(range(0, 60, interval)) and result["exact"]
    assert result["end_marker"]
