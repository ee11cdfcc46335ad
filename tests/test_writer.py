"""TrialWriter: file names, atomicity, no clobbering, S3 staging, and the generated proto code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.locations import event_file_name, index_file_name
from smdebug_lite.format.records import decode_record
from smdebug_lite.format.tensor_codec import decode_tensor_event, narrow
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import LocalStorage, open_storage
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

REPO = Path(__file__).resolve().parents[1]


def read_step(storage, step, worker="worker_0") -> dict[str, np.ndarray]:
    doc = parse_index(storage.read(index_file_name(step, worker)), index_file_name(step, worker))
    blob = storage.read(doc.event_file_name)
    out = {}
    for e in doc.tensors:
        payload, _ = decode_record(blob, e.start_idx)
        out[e.name] = narrow(decode_tensor_event(payload).value, e.orig_dtype)
    return out


def test_names_padding_and_grouping(tmp_path):
    w = TrialWriter(str(tmp_path), "worker_3")
    for step in (0, 7, 1000, 123456):
        sw = w.new_step(step, ModeKeys.EVAL, step // 2)
        sw.add_tensor("x", np.array([step], dtype=np.int64))
        w.submit(sw)
    w.close()
    assert (tmp_path / "events/000000000007/000000000007_worker_3.tfevents").is_file()
    assert (tmp_path / "index/000000000/000000000007_worker_3.json").is_file()
    assert (tmp_path / "index/000000001/000000001000_worker_3.json").is_file()
    assert (tmp_path / "index/000000123/000000123456_worker_3.json").is_file()
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""
    meta = json.loads((tmp_path / "index/000000000/000000000007_worker_3.json").read_text())["meta"]
    assert meta == {"mode": "EVAL", "mode_step": 3,
                    "event_file_name": "events/000000000007/000000000007_worker_3.tfevents"}
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_negative_step_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="step=-1"):
        event_file_name(-1, "worker_0")


def test_second_write_of_a_step_appends_instead_of_clobbering(tmp_path):
    w = TrialWriter(str(tmp_path))
    first = w.new_step(1, ModeKeys.TRAIN, 1)
    first.add_tensor("weights", np.arange(4, dtype=np.float32))
    w.submit(first)
    w.flush()
    again = w.new_step(1, ModeKeys.TRAIN, 1)
    again.add_tensor("scalar/after", np.array([2.0]))
    w.submit(again)
    w.close()
    values = read_step(LocalStorage(str(tmp_path)), 1)
    assert set(values) == {"weights", "scalar/after"}
    assert np.array_equal(values["weights"], np.arange(4, dtype=np.float32))


def test_shape_entry_only_without_raw_tensor(tmp_path):
    """smdebug 1.0.34 loses a value whose shape is also listed; the raw entry carries it."""
    w = TrialWriter(str(tmp_path))
    sw = w.new_step(0, ModeKeys.TRAIN, 0)
    sw.add_shape("a", (2, 3))
    sw.add_tensor("a", np.zeros((2, 3), dtype=np.float32))
    sw.add_shape("b", (5,))
    w.submit(sw)
    w.close()
    doc = json.loads((tmp_path / "index/000000000/000000000000_worker_0.json").read_text())
    assert [s["tensorname"] for s in doc["shape_payload"]] == ["b"]
    assert doc["tensor_payload"][0]["shape"] == [2, 3]


def test_no_end_marker_on_sagemaker(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    w = TrialWriter(str(tmp_path))
    sw = w.new_step(0, ModeKeys.TRAIN, 0)
    sw.add_tensor("a", np.zeros(1))
    w.submit(sw)
    w.close()
    assert not (tmp_path / "training_job_end.ts").exists()


def test_s3_out_dir_is_staged_and_uploaded(s3_bucket, tmp_path):
    uri = f"s3://{s3_bucket}/run/1"
    w = TrialWriter(uri, staging_dir=str(tmp_path / "staging"))
    big = np.random.default_rng(1).random(3 << 20).astype(np.float32)  # 12 MiB: multipart
    for step in range(3):
        sw = w.new_step(step, ModeKeys.TRAIN, step)
        sw.add_tensor("small", np.full(3, step, dtype=np.int32))
        if step == 2:
            sw.add_tensor("big", big)
        w.submit(sw)
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    w.close()
    storage = open_storage(uri)
    keys = storage.list("")
    assert "training_job_end.ts" in keys
    assert "collections/000000000/worker_0_collections.json" in keys
    assert index_file_name(2, "worker_0") in keys
    values = read_step(storage, 2)
    assert np.array_equal(values["small"], np.full(3, 2, dtype=np.int32))
    assert np.array_equal(values["big"], big)
    assert not list((tmp_path / "staging").rglob("*.tfevents"))  # staged copies removed


def _submit_one_step(writer: TrialWriter, size: int) -> None:
    sw = writer.new_step(0, ModeKeys.TRAIN, 0)
    sw.add_tensor("a", np.zeros(size))
    writer.submit(sw)


def test_default_staging_dir_is_removed_after_upload_and_kept_on_failure(
        s3_bucket, s3_endpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ok = TrialWriter(f"s3://{s3_bucket}/run/staged")
    _submit_one_step(ok, 4)
    ok.close()
    assert not list(tmp_path.glob("smdebug-lite-staging-*"))  # nothing left behind in /tmp

    failed = TrialWriter("s3://no-such-bucket-for-smdebug-lite/x")
    failed.uploader.retries = 1
    _submit_one_step(failed, 4)
    with pytest.raises(RuntimeError, match="kept in"):
        failed.close()
    (staging,) = tmp_path.glob("smdebug-lite-staging-*")
    assert list(staging.rglob("*.tfevents"))  # what could not be uploaded is kept


def test_s3_upload_failure_is_reported(tmp_path, s3_endpoint):
    w = TrialWriter("s3://no-such-bucket-for-smdebug-lite/x", staging_dir=str(tmp_path))
    w.uploader.retries = 2
    _submit_one_step(w, 1)
    with pytest.raises(RuntimeError, match="no-such-bucket"):
        w.close()


def test_committed_generated_proto_matches_the_proto_file(tmp_path):
    pytest.importorskip("grpc_tools")
    proto_dir = REPO / "smdebug_lite" / "format" / "proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto_dir}", f"--python_out={tmp_path}",
         str(proto_dir / "smdebug_lite_event.proto")],
        check=True,
    )
    generated = (tmp_path / "smdebug_lite_event_pb2.py").read_text()
    committed = (proto_dir / "smdebug_lite_event_pb2.py").read_text()
    assert generated == committed, "regenerate: see the command at the top of the .proto file"


def test_smdebug_import_name_resolves_to_smdebug_lite():
    code = (
        "import _smdebug_lite_alias; _smdebug_lite_alias.install()\n"
        "import sys, smdebug, smdebug.modes, smdebug_lite\n"
        "from smdebug.exceptions import TensorUnavailable\n"
        "assert smdebug is smdebug_lite, smdebug\n"
        "assert smdebug.modes.TRAIN is smdebug_lite.modes.TRAIN\n"
        "import smdebug_lite.exceptions\n"
        "assert TensorUnavailable is smdebug_lite.exceptions.TensorUnavailable\n"
        "assert sys.modules['smdebug.exceptions'] is smdebug_lite.exceptions\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_local_listing_is_incremental_and_prefix_form_independent(tmp_path):
    w = TrialWriter(str(tmp_path))
    for step in (1, 2, 1500):
        sw = w.new_step(step, ModeKeys.TRAIN, step)
        sw.add_tensor("x", np.zeros(1))
        w.submit(sw)
    w.close()
    storage = LocalStorage(str(tmp_path))
    keys = storage.list("index")
    assert keys == storage.list("index/")
    assert keys == [index_file_name(s, "worker_0") for s in (1, 2, 1500)]
    after = index_file_name(1, "worker_0")
    assert storage.list("index/", start_after=after) == keys[1:]
    assert "training_job_end.ts" in storage.list("")


def test_file_restaged_during_its_upload_is_not_lost(s3_bucket, tmp_path):
    """The collections file is rewritten while an earlier version uploads: the newer staged
    copy must survive that upload and reach S3 through its own queue entry."""
    from smdebug_lite.storage.s3 import s3_client
    from smdebug_lite.writer.s3_uploader import S3Uploader

    rel = "collections/000000000/worker_0_collections.json"
    staging = LocalStorage(str(tmp_path))
    staging.write_atomic(rel, b"v1")
    uploader = S3Uploader(str(tmp_path), f"s3://{s3_bucket}/run")
    restaged = []

    def restage_once(**_):
        if not restaged:
            restaged.append(True)
            staging.write_atomic(rel, b"v2")  # a new inode renamed into place mid-upload
            uploader.enqueue(rel)

    events = s3_client(botocore_retries=False).meta.events
    events.register("before-call.s3.PutObject", restage_once)
    try:
        uploader.enqueue(rel)
        uploader.close()
    finally:
        events.unregister("before-call.s3.PutObject", restage_once)
    assert uploader.error is None
    assert restaged
    assert open_storage(f"s3://{s3_bucket}/run").read(rel) == b"v2"
