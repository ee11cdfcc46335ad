"""The Trial API on s3:// through a real HTTP endpoint (moto's server on 127.0.0.1): the same
answers as the local trial, incremental listing, concurrent and ranged reads, request counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from trial_builders import collections_text, simple_tensors, write_steps
from trial_queries import answer, canonical

from smdebug_lite.exceptions import StepNotYetAvailable, StepUnavailable, TensorCorrupted
from smdebug_lite.trials import S3Trial, create_trial
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

GOLDEN = sorted(p.name for p in GOLDEN_DIR.iterdir() if (p / "index").is_dir())


def upload_dir(client, local: Path, bucket: str, prefix: str) -> str:
    """Every file under `local` to s3://bucket/prefix; returns that URI."""
    for path in sorted(local.rglob("*")):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(local).as_posix()}",
                              Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}"


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_answers_identical_on_s3_and_local(s3_endpoint, s3_bucket, name):
    upload_dir(s3_endpoint.client(), GOLDEN_DIR / name, s3_bucket, f"runs/{name}")
    s3 = create_trial(f"s3://{s3_bucket}/runs/{name}")
    local = create_trial(str(GOLDEN_DIR / name))
    assert isinstance(s3, S3Trial) and s3.name == name and s3.loaded_all_steps
    queries = json.loads((GOLDEN_DIR / "expected" / f"{name}.json").read_text())["queries"]
    for q in queries:
        assert canonical(answer(s3, q)) == canonical(answer(local, q)), q["id"]
    before = s3.requests
    for q in queries:  # everything is loaded and cached: no more requests
        answer(s3, q)
    assert s3.requests == before


def test_writer_made_trial_same_on_s3_and_local(s3_endpoint, s3_bucket, tmp_path):
    def tensors(s):
        return {**simple_tensors(s), "i8": np.array([-3, s], dtype=np.int8),
                "smdebug/reductions/max/w": np.array(11.0 + s, dtype=np.float32)}

    uri = f"s3://{s3_bucket}/jobs/one"
    for out in (uri, str(tmp_path / "one")):
        w = TrialWriter(out)
        w.write_collections(collections_text())
        write_steps(w, range(12), tensors)
        w.close()
    s3, local = create_trial(uri), create_trial(str(tmp_path / "one"))
    assert s3.tensor_names() == local.tensor_names() == ["b", "i8", "loss", "w"]
    assert s3.steps() == local.steps() == list(range(12))
    loaded = s3.requests
    for name in s3.tensor_names():
        a, b = s3.tensor(name).values(), local.tensor(name).values()
        assert list(a) == list(b)
        for step in a:
            assert a[step].dtype == b[step].dtype
            np.testing.assert_array_equal(a[step], b[step])
    assert float(s3.tensor("w").reduction_value(3, "max")) == 14.0
    assert s3.tensor("w").reduction_values(3) == local.tensor("w").reduction_values(3)
    # The first values() fetched each event file once (concurrently); the rest hit the cache.
    assert s3.requests - loaded == 12
    assert s3.tensor("w").shapes() == local.tensor("w").shapes()


def test_live_s3_trial_lists_incrementally(s3_endpoint, s3_bucket):
    uri = f"s3://{s3_bucket}/live"
    w = TrialWriter(uri)
    w.write_collections(collections_text())
    write_steps(w, range(3), simple_tensors)
    t = create_trial(uri)
    assert t.steps() == [0, 1, 2] and not t.loaded_all_steps
    assert t.last_index_token == "live/index/000000000/000000000002_worker_0.json"  # a key
    with pytest.raises(StepNotYetAvailable):
        t.tensor("w").value(3)
    write_steps(w, [3], simple_tensors)
    before = t.requests
    np.testing.assert_array_equal(t.tensor("w").value(3), simple_tensors(3)["w"])
    # One refresh on the miss: end-marker check, one LIST page after the token, the new index
    # file; then the event file (whole: it is small).
    assert t.requests - before == 4
    assert t.last_index_token == "live/index/000000000/000000000003_worker_0.json"
    w.close()
    assert t.steps() == [0, 1, 2, 3]  # the refresh interval may delay this, a miss does not
    t.tensor("w").value(0)
    t.wait_for_steps([3])
    with pytest.raises(StepUnavailable):
        t.tensor("w").value(9)
    assert t.loaded_all_steps
    before = t.requests
    t.steps(), t.tensor_names(), t.has_passed_step(50)
    assert t.requests == before  # nothing left to look for once training ended


def test_ranged_gets_for_large_files(s3_endpoint, s3_bucket, monkeypatch):
    uri = f"s3://{s3_bucket}/ranged"
    w = TrialWriter(uri)
    w.write_collections(collections_text())
    write_steps(w, range(4), simple_tensors)
    w.close()
    monkeypatch.setenv("SMDEBUG_READER_WHOLE_FILE_MB", "0")  # every file counts as large
    t = create_trial(uri)
    assert float(t.tensor("loss").value(2)) == pytest.approx(1 / 3)
    assert t._values.range_reads == 0 and t._values.inline_reads == 1  # (from its index entry)
    assert t.tensor("b").value(2).tolist() == [2.0, 2.0, 2.0]
    assert t._values.range_reads == 1 and t._values.file_reads == 0
    vals = t.tensor("w").values()
    assert all((vals[s] == simple_tensors(s)["w"]).all() for s in range(4))
    assert t._values.range_reads == 5 and t._values.file_reads == 0


def test_corrupted_object_on_s3(s3_endpoint, s3_bucket, tmp_path):
    local = tmp_path / "c"
    w = TrialWriter(str(local))
    w.write_collections(collections_text())
    write_steps(w, range(3), simple_tensors)
    w.close()
    event = local / "events" / "000000000001" / "000000000001_worker_0.tfevents"
    index = json.loads((local / "index" / "000000000" / "000000000001_worker_0.json").read_text())
    entry = next(e for e in index["tensor_payload"] if e["tensorname"] == "b")
    data = bytearray(event.read_bytes())
    data[entry["start_idx"] + entry["content_offset"] + 2] ^= 0x55  # inside b's raw bytes
    event.write_bytes(bytes(data))
    upload_dir(s3_endpoint.client(), local, s3_bucket, "c")
    t = create_trial(f"s3://{s3_bucket}/c")
    names = t.tensor_names()
    errors = {}
    for n in names:
        try:
            t.tensor(n).value(1)
        except TensorCorrupted as e:
            errors[n] = str(e)
    assert len(errors) == 1
    (msg,) = errors.values()
    assert f"s3://{s3_bucket}/c/events/000000000001/000000000001_worker_0.tfevents" in msg
    assert all(t.tensor(n).value(2) is not None for n in names)


def test_s3_path_forms_and_missing_prefix(s3_endpoint, s3_bucket):
    from smdebug_lite.exceptions import SMDebugValueError, TrialDataTimeout

    with pytest.raises(SMDebugValueError):
        create_trial("s3://")
    with pytest.raises(TrialDataTimeout):
        create_trial(f"s3://{s3_bucket}/nothing/here", timeout=0.5)
