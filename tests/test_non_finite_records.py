"""Non-finite provenance records: the format, the writer helper, `Trial.first_non_finite()` /
`non_finite_records()` on real trials (hook-written while training runs, golden, on S3), the
summary and report showing them, and smdebug 1.0.34 reading a trial that holds them."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import GOLDEN_DIR
from refvenv import ref_python, run_ref
from test_s3_trial import upload_dir
from typer.testing import CliRunner

from smdebug_lite.cli.app import build_app
from smdebug_lite.exceptions import NonFiniteRecordDamaged, TrialFileDamaged
from smdebug_lite.format.locations import (
    NON_FINITE_DIR,
    non_finite_file_name,
    parse_non_finite_file_name,
)
from smdebug_lite.format.non_finite import (
    PHASES,
    NonFiniteRecord,
    decode_record,
    encode_record,
)
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.non_finite import write_non_finite_record

RECORD = NonFiniteRecord(step=7, mode="TRAIN", mode_step=7, worker="worker_0", phase="backward",
                         module="encoder.layers.1.linear2",
                         tensor="encoder.layers.1.linear2.weight", nan=3, posinf=1, neginf=0,
                         wall_time=1767225600.25)


def golden_copy(tmp_path: Path, name: str = "pt_basic") -> Path:
    dst = tmp_path / name
    shutil.copytree(GOLDEN_DIR / name, dst)
    return dst


# -- the format -------------------------------------------------------------------------------


def test_round_trip_and_document():
    data = encode_record(RECORD)
    doc = json.loads(data)
    assert doc == {"version": 1, "step": 7, "mode": "TRAIN", "mode_step": 7,
                   "worker": "worker_0", "phase": "backward",
                   "module": "encoder.layers.1.linear2",
                   "tensor": "encoder.layers.1.linear2.weight", "nan": 3, "posinf": 1,
                   "neginf": 0, "wall_time": 1767225600.25}
    assert decode_record(data, "x.json") == RECORD
    assert RECORD.mode_key.name == "TRAIN" and PHASES == ("forward", "loss", "backward", "weights")
    assert RECORD.describe() == ("step 7 (TRAIN step 7), worker_0: backward in "
                                 "encoder.layers.1.linear2, tensor "
                                 "encoder.layers.1.linear2.weight (3 NaN, 1 +Inf, 0 -Inf)")
    # Keys a later version may add are ignored; an int wall time is a float.
    doc.update(extra={"a": 1}, wall_time=5)
    assert decode_record(json.dumps(doc).encode(), "x.json") == replace(RECORD, wall_time=5.0)


@pytest.mark.parametrize("change, reason", [
    ({"step": -1}, "step=-1: expected an integer >= 0"),
    ({"step": True}, "step=True"),
    ({"mode_step": 1.5}, "mode_step=1.5"),
    ({"nan": "3"}, "nan='3'"),
    ({"mode": "TRAINING"}, "mode='TRAINING': expected one of TRAIN, EVAL, PREDICT, GLOBAL"),
    ({"phase": "optimizer"}, "phase='optimizer': expected one of forward, loss, backward"),
    ({"worker": ""}, "worker is empty"),
    ({"tensor": None}, "tensor=None: expected a string"),
    ({"nan": 0, "posinf": 0}, "are all 0"),
    ({"wall_time": float("nan")}, "wall_time=nan"),
    ({"version": 2}, "version 2 is newer than this reader's (1)"),
    ({"version": "1"}, "version='1'"),
])
def test_bad_fields_are_named(change, reason):
    doc = {**RECORD.to_dict(), **change}
    with pytest.raises(NonFiniteRecordDamaged) as err:
        decode_record(json.dumps(doc).encode(), "/t/non_finite/worker_0.json")
    assert reason in str(err.value) and "/t/non_finite/worker_0.json" in str(err.value)
    assert isinstance(err.value, TrialFileDamaged)


@pytest.mark.parametrize("data, reason", [
    (b"", "empty"),
    (b"{not json", "invalid JSON"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b"[" * 100 + b"]" * 100, "nested more than"),
    (b'{"x": "' + b"a" * 70000 + b'"}', "over the 65536-byte limit"),
    (json.dumps({k: v for k, v in RECORD.to_dict().items() if k != "phase"}).encode(),
     "the field 'phase' is missing"),
])
def test_bad_content_names_the_file(data, reason):
    with pytest.raises(NonFiniteRecordDamaged, match=reason) as err:
        decode_record(data, "s3://b/run/non_finite/worker_0.json")
    assert str(err.value).startswith("Non-finite record s3://b/run/non_finite/worker_0.json is "
                                     "damaged")


def test_the_dataclass_refuses_what_the_reader_would():
    with pytest.raises(ValueError, match="phase='update'"):
        replace(RECORD, phase="update")
    with pytest.raises(ValueError, match="all 0"):
        replace(RECORD, nan=0, posinf=0)


def test_locations():
    assert NON_FINITE_DIR == "non_finite"
    assert non_finite_file_name("worker_0") == "non_finite/worker_0.json"
    tf_worker = "/job:worker/replica:0/task:1/device:GPU:0"
    name = non_finite_file_name(tf_worker)
    assert "/" not in name[len("non_finite/"):]
    assert parse_non_finite_file_name("run/" + name) == tf_worker
    assert parse_non_finite_file_name("non_finite/worker_0.json.1a2b3c4d.tmp") is None
    assert parse_non_finite_file_name("index/000000000/000000000001_worker_0.json") is None


# -- the writer helper and the trial ---------------------------------------------------------


def test_first_record_of_a_worker_wins_and_the_trial_orders_them(tmp_path):
    out = golden_copy(tmp_path)
    assert create_trial(str(out)).first_non_finite() is None
    assert write_non_finite_record(str(out), replace(RECORD, worker="worker_1", step=9))
    assert write_non_finite_record(str(out), RECORD)
    assert not write_non_finite_record(str(out), replace(RECORD, step=1))  # a later one
    files = sorted(p.name for p in (out / "non_finite").iterdir())
    assert files == ["worker_0.json", "worker_1.json"]  # no temporary file left behind
    trial = create_trial(str(out))
    assert trial.first_non_finite() == RECORD
    assert [(r.worker, r.step) for r in trial.non_finite_records()] == [("worker_0", 7),
                                                                      ("worker_1", 9)]
    # Same step: the worker decides.
    write_non_finite_record(str(out), replace(RECORD, worker="worker_00", step=7))
    assert [r.worker for r in create_trial(str(out)).non_finite_records()][:2] == [
        "worker_0", "worker_00"]
    # The rest of the trial is unchanged by the records.
    assert trial.steps() == create_trial(str(GOLDEN_DIR / "pt_basic")).steps()
    with pytest.raises(TypeError, match="expected a NonFiniteRecord"):
        write_non_finite_record(str(out), RECORD.to_dict())


def test_damaged_or_misplaced_record_names_its_file(tmp_path):
    out = golden_copy(tmp_path)
    (out / "non_finite").mkdir()
    bad = out / "non_finite" / "worker_0.json"
    bad.write_text(json.dumps({**RECORD.to_dict(), "step": "seven"}))
    with pytest.raises(NonFiniteRecordDamaged, match="step='seven'") as err:
        create_trial(str(out)).first_non_finite()
    assert str(bad) in str(err.value)
    bad.write_bytes(encode_record(replace(RECORD, worker="worker_3")))
    with pytest.raises(NonFiniteRecordDamaged, match="record of worker 'worker_3'"):
        create_trial(str(out)).non_finite_records()


def test_records_appear_while_the_hook_writes(tmp_path):
    """A trial opened while training runs sees a record written later, as it sees new steps."""
    from small_training import train

    import smdebug_lite.pytorch as smd

    out = str(tmp_path / "live")
    hook = train(out, 5, close=False)
    try:
        trial = create_trial(out)
        assert trial.first_non_finite() is None and not trial.loaded_all_steps
        record = replace(RECORD, step=3, mode_step=3, module="2", tensor="2.weight", nan=6,
                         posinf=0, phase="weights")
        assert write_non_finite_record(out, record)
        assert trial.first_non_finite() == record
    finally:
        hook.close()
        smd.del_hook()
    trial.wait_for_steps([4])
    trial.maybe_refresh(force=True)
    assert trial.loaded_all_steps
    # After training ended the listing is final: later files are not looked for.
    assert trial.non_finite_records() == [record]
    write_non_finite_record(out, replace(record, worker="worker_9"))
    assert trial.non_finite_records() == [record]
    assert len(create_trial(out).non_finite_records()) == 2


def test_no_refresh_keeps_the_view_of_a_rule_step(tmp_path):
    from test_rules_helpers import scalar_steps, write_trial

    from smdebug_lite.analysis.utils import no_refresh

    out = write_trial(str(tmp_path / "run"), scalar_steps(3), end=False)
    trial = create_trial(out)
    assert trial.non_finite_records() == []
    write_non_finite_record(out, RECORD)
    with no_refresh(trial):
        assert trial.non_finite_records() == []
    assert trial.non_finite_records() == [RECORD]


def test_records_on_s3(s3_endpoint, s3_bucket, tmp_path):
    uri = upload_dir(s3_endpoint.client(), GOLDEN_DIR / "pt_reductions", s3_bucket, "runs/nf")
    trial = create_trial(uri)
    assert trial.first_non_finite() is None
    assert write_non_finite_record(uri, replace(RECORD, worker="worker_1", step=2))
    assert write_non_finite_record(uri, RECORD)
    assert not write_non_finite_record(uri, replace(RECORD, step=0))
    keys = [o["Key"] for o in s3_endpoint.client().list_objects_v2(
        Bucket=s3_bucket, Prefix="runs/nf/non_finite/")["Contents"]]
    assert sorted(keys) == ["runs/nf/non_finite/worker_0.json", "runs/nf/non_finite/worker_1.json"]
    again = create_trial(uri)
    assert [(r.worker, r.step) for r in again.non_finite_records()] == [("worker_1", 2),
                                                                      ("worker_0", 7)]
    assert again.first_non_finite().worker == "worker_1"
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="runs/nf/non_finite/worker_2.json",
                                    Body=b"[]")
    with pytest.raises(NonFiniteRecordDamaged, match="non_finite/worker_2.json"):
        create_trial(uri).first_non_finite()


# -- summary and report ------------------------------------------------------------------------


def test_summary_and_report_show_the_record(tmp_path):
    out = golden_copy(tmp_path)
    app = build_app()
    r = CliRunner().invoke(app, ["summary", str(out), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["first_non_finite"] is None
    r = CliRunner().invoke(app, ["summary", str(out)])
    assert "none recorded" in r.stdout
    write_non_finite_record(str(out), RECORD)
    r = CliRunner().invoke(app, ["summary", str(out), "--json"])
    assert json.loads(r.stdout)["first_non_finite"] == RECORD.to_dict()
    r = CliRunner().invoke(app, ["summary", str(out)])
    assert "backward in encoder.layers.1.linear2" in r.stdout and "3 NaN, 1 +Inf" in r.stdout

    pytest.importorskip("matplotlib")
    from smdebug_lite.report import write_report

    html = write_report([str(out)], str(tmp_path / "r.html")).read_text()
    assert "Recorded during training" in html
    assert "<code>encoder.layers.1.linear2</code>" in html and "backward phase" in html

    (out / "non_finite" / "worker_0.json").write_text("{")
    r = CliRunner().invoke(app, ["summary", str(out), "--json"])
    data = json.loads(r.stdout)
    assert r.exit_code == 0 and data["first_non_finite"] is None
    assert "invalid JSON" in data["non_finite_error"]
    html = write_report([str(out)], str(tmp_path / "r2.html")).read_text()
    assert "Non-finite record unreadable" in html


# -- smdebug 1.0.34 ----------------------------------------------------------------------------

REF_READER = r"""
import json, sys
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
print(json.dumps({"steps": t.steps(), "names": t.tensor_names(), "workers": sorted(t.workers()),
                  "values": {n: [t.tensor(n).value(s).tolist() for s in t.tensor(n).steps()]
                             for n in t.tensor_names()}}))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_reads_a_trial_with_records(tmp_path):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    out = golden_copy(tmp_path)
    before = run_ref(REF_READER, str(out))
    assert before.returncode == 0, before.stderr[-3000:]
    write_non_finite_record(str(out), RECORD)
    write_non_finite_record(str(out), replace(RECORD, worker="worker_1"))
    after = run_ref(REF_READER, str(out))
    assert after.returncode == 0, after.stderr[-3000:]
    got = json.loads(after.stdout.strip().splitlines()[-1])
    assert got == json.loads(before.stdout.strip().splitlines()[-1])
    assert got["workers"] == ["worker_0"] and len(got["steps"]) == 25
