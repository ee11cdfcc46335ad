"""smdebug-lite end to end, the way SageMaker runs a job with Debugger rules, on one machine.

1. Train a small PyTorch model with the hook configured from a DebugHookConfig JSON.
2. Meanwhile, run each entry of a DebugRuleConfigurations list as its own rule-evaluator
   process (``python -m smdebug_lite.rule_runner``, the container's entrypoint) with its
   RuleParameters as environment variables and a private opt-ml folder, following the trial
   while it is written.
3. Print the rule statuses as DescribeTrainingJob's ``DebugRuleEvaluationStatuses`` shows them.
4. Print the trial summary and write the HTML report (``report.html`` in the output folder).

No AWS and no network: the trial is a local folder, the custom rule a local file.

    python demo/run_demo.py [--out DIR] [--after-training] [--launcher auto|container|manual]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO = Path(__file__).resolve().parent
IMAGE = "smdebug-lite-rule-evaluator:local"
MARKER = "debughookconfig.json"  # an --out folder holding this is ours to clear


def hook_config(trial_dir: Path) -> dict[str, Any]:
    """The DebugHookConfig SageMaker would write to /opt/ml/input/config/debughookconfig.json."""
    return {
        "S3OutputPath": "s3://example-bucket/demo",  # where SageMaker would upload; unused here
        "LocalPath": str(trial_dir),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [
            {"CollectionName": "weights"},
            {"CollectionName": "gradients"},
            {"CollectionName": "losses"},
            {"CollectionName": "relu_activations",  # the hidden layer's output, for the report
             "CollectionParameters": {"include_regex": "^1_output_0$",
                                      "save_interval": "5"}},
        ],
    }


def rule_configurations() -> list[dict[str, Any]]:
    """DebugRuleConfigurations as a CreateTrainingJob request would carry them."""
    def entry(name: str, params: dict[str, str]) -> dict[str, Any]:
        return {"RuleConfigurationName": name, "RuleEvaluatorImage": IMAGE,
                "RuleParameters": params}

    return [
        entry("VanishingGradient", {"rule_to_invoke": "VanishingGradient"}),
        entry("LossNotDecreasing", {"rule_to_invoke": "LossNotDecreasing", "num_steps": "10"}),
        entry("ExplodingTensor", {"rule_to_invoke": "ExplodingTensor",
                                  "collection_names": "weights,gradients"}),
        entry("WeightLimit", {"rule_to_invoke": "WeightLimit", "limit": "0.5",
                              "source_s3_uri": str(DEMO / "rules" / "weight_limit.py")}),
    ]


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "SM_", "SMDEBUG_")) and k not in {"TRAINING_JOB_NAME"}}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # never reach for credentials
    return env


def training_command(launcher: str) -> list[str]:
    script = str(DEMO / "train.py")
    if launcher == "auto":
        launcher_file = ROOT / "container" / "train.py"
        launcher = "container" if launcher_file.is_file() else "manual"
    if launcher == "container":  # zero code change: the launcher attaches the hook
        return [sys.executable, "-m", "smdebug_lite.container.train", script]
    return [sys.executable, script, "--manual-hook"]


def start_rule_job(rule: dict[str, Any], trial_dir: Path, out: Path) -> subprocess.Popen[bytes]:
    name = rule["RuleConfigurationName"]
    job_dir = out / "rules" / name
    job_dir.mkdir(parents=True)
    env = _base_env()
    env.update(rule["RuleParameters"])  # SageMaker delivers RuleParameters as env vars
    env.update({
        "base_trial": str(trial_dir),
        "RULE_CONFIGURATION_NAME": name,
        "SMDEBUG_TRIAL_TIMEOUT": "300",
        "SMDEBUG_RULE_POLL_INTERVAL_S": "0.2",
        "SMDEBUG_TRIAL_POLL_INTERVAL": "0.2",
    })
    log = open(job_dir / "rule_runner.log", "wb")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "smdebug_lite.rule_runner", "--opt-ml", str(job_dir / "opt_ml")],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()


def rule_status(rule: dict[str, Any], out: Path) -> dict[str, Any]:
    """One DebugRuleEvaluationStatuses entry, read from what the rule job wrote."""
    name = rule["RuleConfigurationName"]
    opt_ml = out / "rules" / name / "opt_ml"
    status_file = opt_ml / "processing" / "output" / "rule" / f"{name}.json"
    entry: dict[str, Any] = {"RuleConfigurationName": name}
    if not status_file.is_file():
        entry.update(RuleEvaluationStatus="Error",
                     StatusDetails=f"no status file; see {out / 'rules' / name / 'rule_runner.log'}")
        return entry
    doc = json.loads(status_file.read_text())
    entry["RuleEvaluationStatus"] = doc["status"]
    message = opt_ml / "output" / "message"
    if doc["status"] != "NoIssuesFound" and message.is_file():
        entry["StatusDetails"] = message.read_text(encoding="utf-8")[:1024]
    entry["LastModifiedTime"] = doc.get("ended_at") or doc.get("updated_at")
    return entry


def format_table(statuses: list[dict[str, Any]]) -> str:
    headers = ("RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails")
    rows = []
    for s in statuses:
        details = (s.get("StatusDetails") or "").strip().splitlines()
        first = details[0] if details else ""
        rows.append((s["RuleConfigurationName"], s["RuleEvaluationStatus"],
                     first if len(first) <= 140 else first[:137] + "..."))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers[:2])]
    lines = [f"{headers[0]:<{widths[0]}}  {headers[1]:<{widths[1]}}  {headers[2]}",
             f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * len(headers[2])}"]
    lines += [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in rows]
    return "\n".join(lines)


def prepare_out(out: Path) -> None:
    if out.exists():
        if not (out / MARKER).is_file() and any(out.iterdir()):
            sys.exit(f"{out} exists and is not a demo output folder; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "demo_output",
                   help="working folder, cleared first (default: ./demo_output)")
    p.add_argument("--after-training", action="store_true",
                   help="start the rule jobs when training has finished instead of alongside it")
    p.add_argument("--launcher", choices=("auto", "container", "manual"), default="auto",
                   help="container: python -m smdebug_lite.container.train (zero code change); "
                        "manual: the script creates the hook; auto: container when available")
    p.add_argument("--timeout", type=float, default=600, help="give up after this many seconds")
    args = p.parse_args(argv)

    out = args.out.resolve()
    prepare_out(out)
    trial_dir = out / "trial"
    config_file = out / MARKER
    config_file.write_text(json.dumps(hook_config(trial_dir), indent=2) + "\n")
    rules = rule_configurations()
    (out / "debugruleconfigurations.json").write_text(json.dumps(rules, indent=2) + "\n")

    env = _base_env()
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config_file)
    cmd = training_command(args.launcher)
    print(f"training: {' '.join(cmd[1:])}  (hook config {config_file})", flush=True)
    started = time.monotonic()
    with open(out / "train.log", "wb") as train_log:
        training = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=train_log,
                                    stderr=subprocess.STDOUT)
    jobs: dict[str, subprocess.Popen[bytes]] = {}
    if not args.after_training:
        jobs = {r["RuleConfigurationName"]: start_rule_job(r, trial_dir, out) for r in rules}
        print(f"rule jobs started alongside training: {', '.join(jobs)}", flush=True)
    try:
        train_rc = training.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        training.kill()
        train_rc = -1
    print((out / "train.log").read_text(errors="replace").rstrip(), flush=True)
    if train_rc != 0:
        print(f"training failed (exit {train_rc}); stopping the rule jobs", flush=True)
        for job in jobs.values():
            job.send_signal(signal.SIGTERM)
    elif args.after_training:
        jobs = {r["RuleConfigurationName"]: start_rule_job(r, trial_dir, out) for r in rules}
    for name, job in jobs.items():
        remaining = max(1.0, args.timeout - (time.monotonic() - started))
        try:
            job.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            print(f"rule job {name} did not finish in time; stopping it", flush=True)
            job.send_signal(signal.SIGTERM)
            job.wait(timeout=30)

    statuses = [rule_status(r, out) for r in rules]
    (out / "rule_evaluation_statuses.json").write_text(
        json.dumps({"DebugRuleEvaluationStatuses": statuses}, indent=2) + "\n")
    print("\nDebugRuleEvaluationStatuses:")
    print(format_table(statuses))
    print(f"\n(trial: {trial_dir}; rule job folders and logs: {out / 'rules'})")
    failed = train_rc != 0 or any(s["RuleEvaluationStatus"] == "Error" for s in statuses)
    if train_rc == 0:
        from show_run import show  # demo/show_run.py: summary and HTML report

        failed = not show(rules, trial_dir, out, _base_env()) or failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
