"""The smdebug-lite command on real trials (torch-trained and smdebug-written), local and S3,
including bad input; a few runs as real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_export import GOLDEN, train_trial
from typer.testing import CliRunner

from smdebug_lite.cli.app import build_app
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial

REPO = Path(__file__).resolve().parents[1]
APP = build_app()


def cli(*args: str):
    return CliRunner().invoke(APP, [str(a) for a in args])


def cli_json(*args: str):
    r = cli(*args, "--json")
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def run_subprocess(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smdebug_lite.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=str(REPO), timeout=300,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return train_trial(tmp_path_factory.mktemp("cli") / "run")


def test_summary(run):
    data = cli_json("summary", run)
    assert data["steps_per_mode"] == {"TRAIN": 8, "EVAL": 3}
    assert (data["first_step"], data["last_step"], data["steps"]) == (0, 10, 11)
    assert data["workers"] == ["worker_0"] and data["training_ended"] is True
    assert data["collections"]["losses"] == 1 and data["collections"]["gradients"] == 4
    assert data["size_bytes"] > 0
    golden = cli_json("summary", GOLDEN / "pt_basic")
    assert golden["steps_per_mode"] == {"TRAIN": 20, "EVAL": 5}
    r = cli("summary", run)
    assert r.exit_code == 0 and "TRAIN: 8, EVAL: 3" in r.stdout


def test_ls(run):
    rows = cli_json("ls", run, "--collection", "weights")
    trial = create_trial(str(run))
    assert [r["tensor"] for r in rows] == trial.tensor_names(collection="weights")
    first = rows[0]
    t = trial.tensor(first["tensor"])
    assert first["shape"] == list(t.shape(10)) and first["dtype"] == "float32"
    assert first["steps"] == 11
    eval_rows = cli_json("ls", run, "--regex", "CrossEntropy", "--mode", "EVAL")
    assert [(r["steps"], r["first_step"]) for r in eval_rows] == [(3, 0)]
    golden = cli_json("ls", GOLDEN / "pt_reductions")
    reduced = next(r for r in golden if r["tensor"].endswith("weight"))
    assert {"mean", "abs_mean", "l2", "abs_l2"} <= set(reduced["reductions"])
    assert reduced["shape"] is None


def test_show(run):
    trial = create_trial(str(run))
    loss = trial.tensor_names(collection="losses")[0]
    data = cli_json("show", run, loss, "--mode", "EVAL")
    expected = trial.tensor(loss).values(mode=ModeKeys.EVAL)
    assert data["steps"] == list(expected) and data["columns"] == ["value"]
    assert [r[0] for r in data["rows"]] == [float(v) for v in expected.values()]
    r = cli("show", run, loss)
    assert r.exit_code == 0 and any(c in r.stdout for c in "▁▂▃▄▅▆▇█")
    weight = trial.tensor_names(collection="weights")[0]
    one = cli_json("show", run, weight, "--step", "4")
    assert one["value"] == trial.tensor(weight).value(4).tolist()
    l2 = cli_json("show", run, weight, "--reduction", "l2")
    assert l2["rows"][0][0] == pytest.approx(
        float(trial.tensor(weight).reduction_value(0, "l2")), rel=1e-6)
    reduced = cli_json("show", GOLDEN / "pt_reductions", "Sequential_0.bias")
    assert "abs_mean" in reduced["columns"]


def test_bad_input_exit_codes(run, tmp_path):
    loss = create_trial(str(run)).tensor_names(collection="losses")[0]
    cases = [
        (("summary", tmp_path / "missing"), 3, "no trial at"),
        (("summary", tmp_path), 3, "collections/ or index/"),
        (("show", run, "no_such_tensor"), 4, "no tensor 'no_such_tensor'"),
        (("ls", run, "--collection", "nope"), 4, "no collection 'nope'"),
        (("show", run, loss, "--step", "99"), 5, "nothing saved at step 99"),
        (("show", run, loss, "--step", "5", "--mode", "EVAL"), 5, "saved steps: 0..2"),
        (("show", run, loss, "--mode", "TRAINING"), 2, "is not a mode"),
        (("export", run, tmp_path / "o", "--format", "xlsx"), 2, "--format 'xlsx'"),
        (("rules", run, "--rule", "VanishingGradient", "-p", "threshold"), 2, "KEY=VALUE"),
    ]
    for args, code, text in cases:
        r = cli(*args)
        assert r.exit_code == code, (args, r.output)
        assert text in r.stderr, (args, r.stderr)
    damaged = shutil.copytree(run, tmp_path / "damaged")
    for f in (damaged / "collections").rglob("*.json"):
        f.write_text("{not json")
    r = cli("summary", damaged)
    assert r.exit_code == 6 and "error:" in r.stderr


def _runner(trial: Path, rule: str, params: dict[str, str], opt_ml: Path) -> tuple[int, str]:
    args = [sys.executable, "-m", "smdebug_lite.rule_runner", "--opt-ml", str(opt_ml),
            "--rule", rule, "--base-trial", str(trial.resolve())]
    for k, v in params.items():
        args += ["-p", f"{k}={v}"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=str(REPO), timeout=300)
    message = opt_ml / "output" / "message"
    return proc.returncode, message.read_text() if message.exists() else ""


@pytest.mark.parametrize("trial_kind,rule,params", [
    ("torch", "VanishingGradient", {"threshold": "0.5"}),
    ("torch", "LossNotDecreasing", {}),
    ("golden", "VanishingGradient", {"threshold": "0.5"}),
    ("golden", "ExplodingTensor", {}),
])
def test_rules_match_the_rule_container(run, tmp_path, trial_kind, rule, params):
    trial = run if trial_kind == "torch" else GOLDEN / "pt_reductions"
    code, message = _runner(trial, rule, params, tmp_path / "opt_ml")
    args = ["rules", trial, "--rule", rule]
    for k, v in params.items():
        args += ["-p", f"{k}={v}"]
    r = cli(*args, "--json")
    assert r.exit_code == code, r.output
    (row,) = json.loads(r.stdout)
    assert row["status"] == {0: "NoIssuesFound", 1: "IssuesFound", 2: "Error"}[code]
    assert row["message"] == message
    if row["status"] == "IssuesFound":
        assert row["step"] is not None and "condition met" in row["evidence"]


@pytest.mark.slow
def test_rules_many_trials_custom_rule_and_errors(run, tmp_path):
    rule_file = tmp_path / "my_rules.py"
    rule_file.write_text(
        "from smdebug.rules import Rule\n\n"
        "class LossAbove(Rule):\n"
        "    def __init__(self, base_trial, limit='0'):\n"
        "        super().__init__(base_trial)\n"
        "        self.limit = float(limit)\n\n"
        "    def invoke_at_step(self, step):\n"
        "        name = self.base_trial.tensor_names(collection='losses')[0]\n"
        "        return float(self.base_trial.tensor(name).value(step)) > self.limit\n")
    rows = cli_json("rules", run, GOLDEN / "pt_basic", "--rule", "LossAbove",
                    "--rule-file", rule_file, "-p", "limit=0.0")
    assert [(r["trial"], r["status"], r["step"]) for r in rows] == [
        (str(run), "IssuesFound", 0), (str(GOLDEN / "pt_basic"), "IssuesFound", 0)]
    r = cli("rules", run, "--rule", "NoSuchRule", "--rule", "LossNotDecreasing")
    assert r.exit_code == 2
    assert "Error" in r.stdout and "NoIssuesFound" in r.stdout
    r = cli("rules", run, "--rule", "LossNotDecreasing", "--engine", "ray")
    assert r.exit_code in (7, 0), r.output


def test_export_and_tensorboard_commands(run, tmp_path):
    r = cli("export", run, tmp_path / "ds", "--collection", "losses", "--collection", "weights")
    assert r.exit_code == 0, r.output
    tensors = {p.name for p in (tmp_path / "ds").iterdir()}
    trial = create_trial(str(run))
    expected = set(trial.tensor_names(collection="losses")) | set(
        trial.tensor_names(collection="weights"))
    from urllib.parse import unquote
    assert {unquote(t.split("=", 1)[1]) for t in tensors} == expected
    r = cli("export", run, tmp_path / "ds")
    assert r.exit_code == 8 and "not empty" in r.stderr
    r = cli("export", GOLDEN / "pt_basic", tmp_path / "g.csv", "--format", "csv",
            "--start-step", "20", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["format"] == "csv"
    steps = {int(line.split(",")[5]) for line in (tmp_path / "g.csv").read_text().splitlines()[1:]}
    assert steps == set(range(20, 25))
    r = cli("tensorboard", run, tmp_path / "tb", "--collection", "losses")
    assert r.exit_code == 0 and list((tmp_path / "tb" / "EVAL").glob("*.tfevents"))


def test_report_and_compact_call_their_features(run, tmp_path):
    r = cli("report", run, "-o", tmp_path / "r.html", "--rules", "LossNotDecreasing")
    if r.exit_code == 7:
        assert "not available" in r.stderr
    else:
        assert r.exit_code == 0, r.output
        assert (tmp_path / "r.html").is_file()
    copy = shutil.copytree(GOLDEN / "pt_basic", tmp_path / "golden")
    r = cli("compact", copy)
    assert r.exit_code in (0, 7), r.output
    if r.exit_code == 0:
        assert create_trial(str(copy)).steps() == create_trial(str(GOLDEN / "pt_basic")).steps()
    assert cli("compact", tmp_path / "missing").exit_code == 3


@pytest.mark.slow
def test_subprocess_help_json_and_exit_codes(run):
    r = run_subprocess("--help")
    assert r.returncode == 0 and "Examples:" in r.stdout and "export" in r.stdout
    for command in ("summary", "ls", "show", "rules", "export", "report", "tensorboard",
                    "compact"):
        h = run_subprocess(command, "--help")
        assert h.returncode == 0 and "smdebug-lite " + command in h.stdout, command
    r = run_subprocess("ls", run, "--json")
    assert r.returncode == 0, r.stderr
    assert {row["tensor"] for row in json.loads(r.stdout)} == set(
        create_trial(str(run)).tensor_names())
    r = run_subprocess("rules", GOLDEN / "pt_basic", "--rule", "VanishingGradient",
                       "-p", "threshold=0.5")
    assert r.returncode == 1 and "IssuesFound" in r.stdout
    r = run_subprocess("show", run, "nope")
    assert r.returncode == 4 and r.stderr.startswith("error: no tensor 'nope'")


def test_rules_prints_its_table_without_the_invokers_log_lines(run, tmp_path):
    """In a fresh process, where the rule invoker's and the actions' modules are first
    imported while the job runs: their INFO lines (the container's log) stay out of the
    command's output."""
    r = run_subprocess("rules", run, "--rule", "LossNotDecreasing")
    assert r.returncode == 0 and "NoIssuesFound" in r.stdout, r.stderr
    assert "execution of rule" not in r.stdout + r.stderr
    actions = json.dumps([{"name": "stopsignal", "path": str(tmp_path)}])
    r = run_subprocess("rules", GOLDEN / "pt_basic", "--rule", "VanishingGradient",
                       "-p", "threshold=0.5", "--action-json", actions)
    assert r.returncode == 1 and "IssuesFound" in r.stdout, r.stderr
    assert list(tmp_path.iterdir()), "the stop signal action did not run"
    assert "stop signal" not in r.stdout + r.stderr and "action(s)" not in r.stdout + r.stderr


def test_s3_trial(run, s3_endpoint, s3_bucket):
    client = s3_endpoint.client()
    for f in run.rglob("*"):
        if f.is_file():
            client.upload_file(str(f), s3_bucket, f"jobs/run/{f.relative_to(run).as_posix()}")
    uri = f"s3://{s3_bucket}/jobs/run"
    r = run_subprocess("summary", uri, "--json", env=s3_endpoint.env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["steps_per_mode"] == {"TRAIN": 8, "EVAL": 3}
    assert data["size_bytes"] == sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
    loss = create_trial(str(run)).tensor_names(collection="losses")[0]
    shown = cli_json("show", uri, loss)
    local = cli_json("show", run, loss)
    assert shown["rows"] == local["rows"]
    r = run_subprocess("summary", f"s3://{s3_bucket}/nothing-here", "--timeout", "0",
                       env=s3_endpoint.env)
    assert r.returncode == 3 and "error:" in r.stderr
