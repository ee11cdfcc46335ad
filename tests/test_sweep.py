"""A sweep's trials found under a prefix (local and S3) and exported as one Parquet dataset
partitioned by trial, then tensor: the gradient-norm query of docs/scale.md, run by DuckDB,
gives the Trial API's numbers; the dataset holds each trial's own export, row for row."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest
from sweep_trials import LEARNING_RATES, STEPS, upload_tree, write_sweep

from smdebug_lite.distributed import expand_trials, trial_names
from smdebug_lite.export import to_arrow
from smdebug_lite.export.sweep import export_sweep
from smdebug_lite.trials import create_trial

REPO = Path(__file__).resolve().parents[1]
RUNS = sorted(LEARNING_RATES)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sweep") / "sweep"
    write_sweep(root)
    return root


def docs_query() -> str:
    """The first SQL block of the sweep section of docs/scale.md, as documented."""
    text = (REPO / "docs" / "scale.md").read_text()
    section = text[text.index("## A sweep as one table"):]
    return re.search(r"```sql\n(.*?)```", section, re.S).group(1)


def trial_api_norms(path: Path) -> dict[str, float]:
    """What the documented query computes, from the Trial API: the l2 norm of all gradients
    at each step (`per_step`), then its mean, max and last value."""
    t = create_trial(str(path))
    names = t.tensor_names(collection="gradients")
    per_step = {s: math.sqrt(sum(t.tensor(n).reduction_value(s, "l2") ** 2 for n in names))
                for s in t.steps()}
    top = max(per_step, key=per_step.get)
    return {"steps": len(per_step), "mean": sum(per_step.values()) / len(per_step),
            "max": per_step[top], "per_step": per_step, "last": per_step[max(per_step)]}


def _sorted_rows(table) -> list[dict]:
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: (r["trial"], r["tensor"], r["mode"], r["step"],
                                       r["worker"], r["reduction"]))


def test_documented_duckdb_query_gives_the_trial_api_numbers(sweep, tmp_path, monkeypatch):
    export_sweep([sweep], tmp_path / "sweep.parquet")
    assert sorted(p.name for p in (tmp_path / "sweep.parquet").iterdir()) == [
        f"trial={r}" for r in RUNS]
    monkeypatch.chdir(tmp_path)  # the documented query reads ./sweep.parquet
    got = duckdb.sql(docs_query()).fetchall()
    assert [r[0] for r in got] == sorted(RUNS,
                                         key=lambda r: -trial_api_norms(sweep / r)["mean"])
    for trial, steps, mean, top, step_of_max, last in got:
        want = trial_api_norms(sweep / trial)
        assert steps == want["steps"] == STEPS
        assert mean == pytest.approx(want["mean"], rel=1e-6)
        assert top == pytest.approx(want["max"], rel=1e-6)
        # Where the maximum is (any step of it, when several share it: lr 0 never moves).
        assert want["per_step"][step_of_max] == pytest.approx(want["max"], rel=1e-6)
        assert last == pytest.approx(want["last"], rel=1e-6)


def test_sweep_dataset_holds_each_trials_own_export(sweep, tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "smdebug_lite.cli", "export", str(sweep / "lr-0"),
                        str(sweep / "lr-0.3"), str(out), "--json"],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trials"] == {"lr-0": str(sweep / "lr-0"),
                                              "lr-0.3": str(sweep / "lr-0.3")}
    got = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    want = [row for run in ("lr-0", "lr-0.3") for row in to_arrow(str(sweep / run)).to_pylist()]
    assert len(want) > 0
    assert _sorted_rows(got.select(list(want[0]))) == sorted(
        want, key=lambda r: (r["trial"], r["tensor"], r["mode"], r["step"], r["worker"],
                             r["reduction"]))
    # A sweep is one Parquet dataset: CSV, or an output that exists, is refused.
    r = subprocess.run([sys.executable, "-m", "smdebug_lite.cli", "export", str(sweep),
                        str(tmp_path / "x.csv"), "--format", "csv"],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert r.returncode == 2 and "one Parquet dataset" in r.stderr
    with pytest.raises(FileExistsError, match="not empty"):
        export_sweep([sweep], out)


def test_s3_prefix_of_trials(sweep, s3_endpoint, s3_bucket, tmp_path):
    client = s3_endpoint.client()
    for run in RUNS:  # SageMaker's layout: <prefix>/<job name>/debug-output/
        upload_tree(client, s3_bucket, f"jobs/{run}/debug-output", sweep / run)
    client.put_object(Bucket=s3_bucket, Key="jobs/notes.txt", Body=b"not a trial")
    uris = expand_trials([f"s3://{s3_bucket}/jobs"])
    assert uris == [f"s3://{s3_bucket}/jobs/{r}/debug-output" for r in RUNS]
    assert trial_names(uris) == [f"{r}/debug-output" for r in RUNS]
    export_sweep([f"s3://{s3_bucket}/jobs/"], tmp_path / "s3.parquet")
    export_sweep([sweep], tmp_path / "local.parquet")
    q = ("SELECT regexp_replace(trial, '/debug-output$', '') AS run, tensor, step, reduction, "
         "value FROM read_parquet('{}/**/*.parquet', hive_partitioning = true) ORDER BY ALL")
    from_s3 = duckdb.sql(q.format(tmp_path / "s3.parquet")).fetchall()
    assert from_s3 and from_s3 == duckdb.sql(q.format(tmp_path / "local.parquet")).fetchall()


def test_local_prefixes_and_what_stays_as_given(sweep, tmp_path):
    nested = tmp_path / "nested"
    (nested / "a" / "run-1" / "index").mkdir(parents=True)
    (nested / "a" / "run-2" / "events").mkdir(parents=True)
    (nested / "b" / "run-1").mkdir(parents=True)
    (nested / "b" / "run-1" / "training_job_end.ts").write_text("")
    (nested / "b" / "run-1" / "inner" / "index").mkdir(parents=True)  # inside a trial: not one
    (nested / "empty").mkdir()
    found = expand_trials([str(nested), str(sweep / "lr-0"), str(tmp_path / "missing"),
                           str(nested / "empty"), str(nested / "a" / "run-1")])
    assert found == [str(nested / "a" / "run-1"), str(nested / "a" / "run-2"),
                     str(nested / "b" / "run-1"), str(sweep / "lr-0"),
                     str(tmp_path / "missing"), str(nested / "empty")]
    assert trial_names(found[:3]) == ["a/run-1", "run-2", "b/run-1"]
    with pytest.raises(ValueError, match="gs://x"):
        expand_trials(["gs://x/y"])
