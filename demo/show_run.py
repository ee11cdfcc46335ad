"""The demo's last part: the trial summary and the HTML report of the run.

The summary is the `smdebug-lite summary` command's when the command is installed beside this
Python, and a few lines from the Trial API otherwise. The report is `smdebug_lite.report.write_report` with
the demo's rule configurations evaluated again on the finished trial, so each verdict comes with
the step and evidence that triggered it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RESERVED_PARAMETERS = {"rule_to_invoke", "source_s3_uri"}


def _size_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def trial_summary(trial_dir: Path) -> str:
    """A short summary from the Trial API: steps per mode, workers, collections, size."""
    from smdebug_lite.trials import create_trial

    trial = create_trial(str(trial_dir), timeout=10)
    steps = trial.steps()
    modes = ", ".join(f"{m.name}: {len(trial.steps(mode=m))}" for m in trial.modes()) or "none"
    names = set(trial.tensor_names())
    colls = ", ".join(f"{c} ({sum(1 for n in names if coll.matches(n))})"
                      for c, coll in sorted(trial.collections().items()))
    lines = [
        f"trial            {trial_dir}",
        f"steps per mode   {modes}",
        f"first/last step  {steps[0] if steps else '-'} / {steps[-1] if steps else '-'}",
        f"workers          {', '.join(trial.workers())}",
        f"collections      {colls}",
        f"training ended   {'yes' if trial.loaded_all_steps else 'no'}",
        f"size on disk     {_size_on_disk(trial_dir) / 1024:.0f} KiB",
    ]
    return "\n".join(lines)


def print_summary(trial_dir: Path, env: dict[str, str]) -> None:
    command = Path(sys.executable).parent / "smdebug-lite"
    if command.is_file():
        proc = subprocess.run([str(command), "summary", str(trial_dir)], env=env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode == 0:
            print(proc.stdout.rstrip(), flush=True)
            return
    print(trial_summary(trial_dir), flush=True)


def rule_jobs(rules: list[dict[str, Any]], trial_dir: Path) -> list[Any]:
    """The DebugRuleConfigurations as rule jobs (parameters without the reserved ones)."""
    from smdebug_lite.distributed import RuleJob

    return [RuleJob(trial=str(trial_dir), rule=r["RuleParameters"]["rule_to_invoke"],
                    params={k: v for k, v in r["RuleParameters"].items()
                            if k not in RESERVED_PARAMETERS},
                    rule_file=r["RuleParameters"].get("source_s3_uri"))
            for r in rules]


def write_demo_report(rules: list[dict[str, Any]], trial_dir: Path, out: Path) -> Path | None:
    """The report of the run, or None (with the reason printed) when matplotlib is missing."""
    from smdebug_lite.report import MissingDependency, write_report

    try:
        return write_report([str(trial_dir)], str(out / "report.html"),
                            rules=rule_jobs(rules, trial_dir))
    except MissingDependency as e:
        print(f"report not written: {e}", flush=True)
        return None


def show(rules: list[dict[str, Any]], trial_dir: Path, out: Path, env: dict[str, str]) -> bool:
    """Print the summary, write the report and say where it is; False if it was not written."""
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")  # keep the trial loading quiet
    print("\nTrial summary:", flush=True)
    print_summary(trial_dir, env)
    report = write_demo_report(rules, trial_dir, out)
    if report is None:
        return False
    print(f"\nHTML report: {report}  (open it in a browser; it needs no network)", flush=True)
    return True
