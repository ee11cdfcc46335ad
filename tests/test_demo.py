"""A fresh run of the demo trains, runs four rule jobs next to training, prints their statuses,
then the trial summary, and writes the HTML report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("torch")


@pytest.mark.parametrize("extra", [pytest.param([], marks=pytest.mark.slow),
                                   pytest.param(["--after-training", "--launcher", "manual"],
                                                marks=pytest.mark.slow)])
def test_demo_prints_rule_statuses(tmp_path: Path, extra: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.run([sys.executable, str(ROOT / "demo" / "run_demo.py"),
                           "--out", str(tmp_path / "demo"), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    table = out[out.index("DebugRuleEvaluationStatuses:"):]
    rows = {line.split()[0]: line.split()[1] for line in table.splitlines()[3:7]}
    assert rows == {"VanishingGradient": "NoIssuesFound", "LossNotDecreasing": "NoIssuesFound",
                    "ExplodingTensor": "NoIssuesFound", "WeightLimit": "IssuesFound"}, table
    assert "RuleEvaluationConditionMet: Evaluation of the rule WeightLimit at step" in table

    doc = json.loads((tmp_path / "demo" / "rule_evaluation_statuses.json").read_text())
    statuses = {s["RuleConfigurationName"]: s for s in doc["DebugRuleEvaluationStatuses"]}
    assert "StatusDetails" not in statuses["VanishingGradient"]  # as DescribeTrainingJob
    assert statuses["WeightLimit"]["StatusDetails"].endswith("condition being met\n")
    assert (tmp_path / "demo" / "trial" / "training_job_end.ts").exists()

    # It ends with the trial summary and the HTML report, and says where the report is.
    summary = out[out.index("Trial summary:"):]
    assert "TRAIN: 60" in summary and "EVAL: 5" in summary, summary
    report = tmp_path / "demo" / "report.html"
    assert f"HTML report: {report}" in out
    text = report.read_text(encoding="utf-8")
    assert len(text) > 50_000 and text.count('src="data:image/png;base64,') == 4, len(text)
    assert 'status IssuesFound">IssuesFound</span></td><td class="num">' in text  # WeightLimit
    for section in ("Loss per mode", "Gradient norm per layer", "Weights", "Activations",
                    "First NaN / Inf"):
        assert f"<h3>{section}</h3>" in text
