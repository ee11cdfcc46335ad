"""The rule and S3 read benchmarks run end to end at a tiny size against smdebug 1.0.34 (their
figures mean nothing at this size; the run proves that every variant works)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from refvenv import ref_python

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(ref_python()[0] is None, reason=ref_python()[1])


def run_bench(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / script), *args],
                          capture_output=True, text=True, env=full_env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_rules_on_a_smdebug_written_trial(tmp_path):
    out = tmp_path / "rules.json"
    run_bench("bench_rules.py", "--steps", "12", "--tensors", "4", "--repeat", "1",
              "--trials", "smdebug-written", "--dir", str(tmp_path), "--json", str(out))
    rows = json.loads(out.read_text())["rows"]
    assert [r["rule"] for r in rows] == ["VanishingGradient", "ExplodingTensor",
                                         "LossNotDecreasing"]
    for row in rows:
        # Every step evaluated by smdebug 1.0.34, our built-in and the same custom rule.
        assert [row[k]["steps"] for k in ("smdebug", "lite_builtin", "lite_custom")] == [12] * 3
        assert row["speedup"] and row["speedup_custom"]


@pytest.mark.slow
def test_trial_reads_through_the_s3_latency_proxy(tmp_path):
    stdout = run_bench(
        "bench_trial_smdebug_written.py", "--steps", "12", "--tensors", "5",
        "--s3-latency-ms", "20", "--quick", "--budget", "0.2", "--workdir", str(tmp_path),
        "--kinds", "smdebug-written,smdebug-written compacted",
        env={"SMDEBUG_COMPACT_MIN_FILES": "10"})
    assert "latency proxy (20 ms)" in stdout
    rows = [line for line in stdout.splitlines() if " s3+20ms " in line]
    for kind in ("smdebug-written ", "smdebug-written compacted "):
        for label in ("create_trial + tensor_names", "one tensor, all steps",
                      "one tensor, value(s) loop"):
            assert any(r.startswith(kind) and label in r for r in rows), (kind, label, stdout)
