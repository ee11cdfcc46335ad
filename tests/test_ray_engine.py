"""Rules over many trials on a real local Ray cluster (2 CPUs, started in this process), against
the local engine on the same trials: trials written by real PyTorch training, on disk and on S3
(moto's server), a built-in rule that finds issues in one of them, a custom rule from a file, a
missing trial; outcomes stream back as tasks finish, and a task that dies is an Error outcome.
"""

from __future__ import annotations

import ast
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import ray
from sweep_trials import LOSS_RULE_PARAMS, STUCK_RUN, upload_tree, write_sweep

from smdebug_lite.distributed import RuleJob, evaluate_jobs, expand_trials
from smdebug_lite.distributed.ray_engine import run_jobs

REPO = Path(__file__).resolve().parents[1]
CUSTOM_RULE = Path(__file__).resolve().parent / "gradient_rule.py"

WAIT_RULE = '''
import os
import time

from smdebug.rules.rule import Rule


class WaitForFile(Rule):
    """Holds its first step until `path` exists (a test releases it)."""

    def __init__(self, base_trial, path=""):
        super().__init__(base_trial)
        self.path = path

    def invoke_at_step(self, step):
        give_up = time.monotonic() + 120
        while not os.path.exists(self.path):
            if time.monotonic() > give_up:
                raise RuntimeError("never released")
            time.sleep(0.05)
        return False
'''

CRASH_RULE = '''
import os

from smdebug.rules.rule import Rule


class KillsItsWorker(Rule):
    def invoke_at_step(self, step):
        os._exit(3)
'''


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    write_sweep(root / "sweep")
    return root / "sweep"


@pytest.fixture(scope="module")
def cluster(s3_endpoint):
    """A local Ray cluster of 2 CPUs; its workers inherit the S3 endpoint's environment."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _key(o):
    return (o.trial, o.rule, o.status, o.step or -1)


def _jobs(trials: list[str], rule_file: str) -> list[RuleJob]:
    jobs = []
    for t in trials:
        jobs.append(RuleJob(t, "LossNotDecreasing", dict(LOSS_RULE_PARAMS)))
        jobs.append(RuleJob(t, "GradientMagnitude", {"threshold": "0.02"}, rule_file=rule_file))
    # One step range: steps 6.. of the stuck run (the rule checks every 4 steps from there).
    jobs.append(RuleJob(trials[0], "LossNotDecreasing", dict(LOSS_RULE_PARAMS),
                        start_step=6, end_step=12))
    return jobs


@pytest.mark.slow
def test_ray_outcomes_are_the_local_ones(cluster, sweep, s3_endpoint, s3_bucket, tmp_path,
                                         monkeypatch):
    s3_trial = upload_tree(s3_endpoint.client(), s3_bucket, "runs/lr-0", sweep / STUCK_RUN)
    shutil.copy(CUSTOM_RULE, tmp_path / "my_rules.py")
    monkeypatch.chdir(sweep)  # relative trial paths and rule files mean the same on the workers
    trials = [STUCK_RUN, "lr-0.1", str(sweep / "lr-0.3"), s3_trial, "no-such-run"]
    jobs = _jobs(trials, str(tmp_path / "my_rules.py"))

    local = list(evaluate_jobs(jobs, engine="local"))
    on_ray = list(evaluate_jobs(jobs, engine="ray"))

    assert sorted(on_ray, key=_key) == sorted(local, key=_key)  # messages and evidence too
    by = {(o.trial, o.rule, o.status) for o in on_ray}
    assert (STUCK_RUN, "LossNotDecreasing", "IssuesFound") in by
    assert (s3_trial, "LossNotDecreasing", "IssuesFound") in by
    assert ("lr-0.1", "LossNotDecreasing", "NoIssuesFound") in by
    assert {o.status for o in on_ray if o.rule == "GradientMagnitude"} >= {"IssuesFound"}
    missing = [o for o in on_ray if o.trial == "no-such-run"]
    assert {o.status for o in missing} == {"Error"} and len(missing) == 2
    assert all("no-such-run" in o.message for o in missing)
    ranged = [o for o in on_ray if o.trial == STUCK_RUN and o.rule == "LossNotDecreasing"]
    assert sorted(o.step for o in ranged) == [4, 10]


@pytest.mark.slow
def test_outcomes_stream_back_as_tasks_finish(cluster, sweep, tmp_path):
    rule_file = tmp_path / "wait_rule.py"
    rule_file.write_text(WAIT_RULE)
    release = tmp_path / "release"
    jobs = [RuleJob(str(sweep / "lr-0.1"), "WaitForFile", {"path": str(release)},
                    rule_file=str(rule_file)),
            RuleJob(str(sweep / STUCK_RUN), "LossNotDecreasing", dict(LOSS_RULE_PARAMS))]
    outcomes = run_jobs(jobs)
    first = next(outcomes)  # the waiting job cannot have finished: nothing released it yet
    assert (first.rule, first.status) == ("LossNotDecreasing", "IssuesFound")
    release.write_text("go")
    second = next(outcomes)
    assert (second.rule, second.status) == ("WaitForFile", "NoIssuesFound")
    assert next(outcomes, None) is None


@pytest.mark.slow
def test_a_task_that_dies_is_an_error_outcome(cluster, sweep, tmp_path):
    rule_file = tmp_path / "crash_rule.py"
    rule_file.write_text(CRASH_RULE)
    dying = RuleJob(str(sweep / "lr-0.1"), "KillsItsWorker", rule_file=str(rule_file))
    fine = RuleJob(str(sweep / STUCK_RUN), "LossNotDecreasing", dict(LOSS_RULE_PARAMS))
    outcomes = {o.rule: o for o in run_jobs([dying, fine])}
    assert outcomes["LossNotDecreasing"].status == "IssuesFound"
    died = outcomes["KillsItsWorker"]
    assert died.status == "Error" and died.trial == dying.trial
    assert died.message.startswith(
        f"ClientError: rule KillsItsWorker on trial {dying.trial} failed on the Ray cluster")


@pytest.mark.slow
def test_cli_rules_over_a_prefix_on_a_cluster_by_address(cluster, sweep, tmp_path):
    missing = str(tmp_path / "missing-run")
    args = [sys.executable, "-m", "smdebug_lite.cli", "rules", str(sweep), missing,
            "--rule", "LossNotDecreasing",
            *[a for k, v in LOSS_RULE_PARAMS.items() for a in ("-p", f"{k}={v}")],
            "--engine", "ray", "--ray-address", cluster, "--json"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert proc.returncode == 2, proc.stderr  # the missing trial's Error wins, as in a container
    rows = sorted(json.loads(proc.stdout), key=lambda r: r["trial"])
    assert "Traceback" not in proc.stderr, proc.stderr
    trials = expand_trials([str(sweep), missing])
    assert trials[:3] == [str(sweep / n) for n in ("lr-0", "lr-0.1", "lr-0.3")]
    local = [RuleJob(t, "LossNotDecreasing", dict(LOSS_RULE_PARAMS)) for t in trials]
    expected = sorted(({"trial": o.trial, "rule": o.rule, "status": o.status, "step": o.step,
                        "message": o.message, "evidence": o.evidence}
                       for o in evaluate_jobs(local)), key=lambda r: r["trial"])
    assert rows == expected
    assert [r["status"] for r in rows] == ["IssuesFound", "NoIssuesFound", "NoIssuesFound",
                                           "Error"]


def test_nothing_but_the_ray_engine_imports_ray():
    importers = []
    sources = [p for top in ("smdebug_lite", "container", "rule_runner")  # the images' programs too
               for p in (REPO / top).rglob("*.py")]
    for path in sorted(sources):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "ray" or n.startswith("ray.") for n in names):
                importers.append(path.relative_to(REPO).as_posix())
    assert importers == ["smdebug_lite/distributed/ray_engine.py"]
    code = ("import sys, smdebug_lite, smdebug_lite.distributed, "
            "smdebug_lite.rule_runner.evaluation, smdebug_lite.export.sweep, smdebug_lite.cli.app; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(REPO), timeout=120)


def test_an_address_nobody_answers_at_fails_fast(sweep):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [sys.executable, "-m", "smdebug_lite.cli", "rules", str(sweep), "--rule",
         "LossNotDecreasing", "--engine", "ray", "--ray-address", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert proc.returncode == 6, proc.stderr
    assert f"cannot reach the Ray cluster at '127.0.0.1:{port}'" in proc.stderr
