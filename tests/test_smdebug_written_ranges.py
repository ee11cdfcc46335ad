"""Reading trials written by smdebug 1.0.34 (the golden fixtures, and files its own writer makes
here) by ranges: one tensor's values read only that tensor's records (local preads, S3 ranged
GETs), a saved reduction reads only the reduction records, the TFRecord framing of what is read
is checked, and a damaged record is reported for its own tensor and step only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from refvenv import ref_python, run_ref
from test_s3_trial import upload_dir

import smdebug_lite.storage.local_reads as local_reads
from smdebug_lite.exceptions import TensorCorrupted
from smdebug_lite.format.event_batch import view_events
from smdebug_lite.format.event_view import view_event
from smdebug_lite.format.records import RecordError, decode_record
from smdebug_lite.format.tensor_codec import decode_tensor_event
from smdebug_lite.storage.ranges import coalesce, slice_ranges
from smdebug_lite.storage.s3 import S3Storage
from smdebug_lite.trials import create_trial

BASIC = GOLDEN_DIR / "pt_basic"
REDUCTIONS = GOLDEN_DIR / "pt_reductions"


def index_doc(root: Path, step: int) -> dict:
    return json.loads((root / "index" / "000000000" / f"{step:012d}_worker_0.json").read_text())


def entries(root: Path, step: int) -> dict[str, dict]:
    return {e["tensorname"]: e for e in index_doc(root, step)["tensor_payload"]}


def event_path(root: Path, step: int) -> Path:
    return root / "events" / f"{step:012d}" / f"{step:012d}_worker_0.tfevents"


def protobuf_value(root: Path, step: int, name: str) -> np.ndarray:
    """The record decoded the slow, general way (protobuf), as the reference."""
    payload, _ = decode_record(event_path(root, step).read_bytes(), entries(root, step)[name]["start_idx"])
    return decode_tensor_event(payload).value


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))



# -- the record walker ----------------------------------------------------------------------


@pytest.mark.parametrize("root", [BASIC, REDUCTIONS], ids=lambda p: p.name)
def test_every_golden_record_viewed_as_protobuf_decodes_it(root):
    seen = 0
    for index in sorted((root / "index").rglob("*.json")):
        doc = json.loads(index.read_text())
        data = (root / doc["meta"]["event_file_name"]).read_bytes()
        for e in doc["tensor_payload"]:
            arr = view_event(data, e["start_idx"], e["length"])
            ref = decode_tensor_event(decode_record(data, e["start_idx"])[0]).value
            assert arr is not None, e
            assert arr.dtype == ref.dtype and arr.shape == ref.shape
            np.testing.assert_array_equal(arr, ref)
            assert not arr.flags.writeable
            seen += 1
    assert seen > 100


def test_record_walker_refuses_broken_framing():
    e = entries(BASIC, 5)["Sequential_0.bias"]
    data = event_path(BASIC, 5).read_bytes()
    start, length = e["start_idx"], e["length"]
    assert view_event(data, start, length) is not None
    for offset in (2, 9, length - 2):  # length field, length CRC, footer
        bad = bytearray(data)
        bad[start + offset] ^= 0xFF
        assert view_event(bytes(bad), start, length) is None
        with pytest.raises(RecordError):
            decode_record(bytes(bad), start)
    assert view_event(data[: start + length - 1], start, length) is None  # truncated
    assert view_event(data, start, length - 1) is None  # index length disagrees with the header


def test_records_viewed_together_match_protobuf_and_outliers_are_walked():
    name = "Sequential_2.weight"
    datas, lengths, refs = [], [], []
    for s in range(25):
        e = entries(BASIC, s)[name]
        data = event_path(BASIC, s).read_bytes()[e["start_idx"] : e["start_idx"] + e["length"]]
        datas.append(data)
        lengths.append(e["length"])
        refs.append(decode_tensor_event(decode_record(data)[0]).value)
    assert max(lengths.count(n) for n in set(lengths)) >= 8  # a group viewed with numpy
    renamed = bytearray(datas[3])  # another tag of the same length: walked alone, still right
    at = renamed.index(name.encode())
    renamed[at] = ord("T")
    datas[3] = bytes(renamed)
    refs[3] = decode_tensor_event(decode_record(datas[3])[0]).value
    broken = bytearray(datas[4])
    broken[-1] ^= 0xFF  # footer
    datas[4] = bytes(broken)
    datas[5] = datas[5][:-1]  # shorter than the index says
    got = view_events(datas, lengths)
    assert got[4] is None and got[5] is None
    for k, (arr, ref) in enumerate(zip(got, refs, strict=True)):
        if k in (4, 5):
            continue
        assert arr is not None and arr.shape == ref.shape and not arr.flags.writeable
        np.testing.assert_array_equal(arr, ref)


# -- local ranged reads ---------------------------------------------------------------------


@pytest.mark.parametrize("threaded", [False, True])
def test_values_read_only_that_tensors_records(monkeypatch, threaded):
    if threaded:
        monkeypatch.setattr(local_reads, "PARALLEL_MIN", 4)
    t = create_trial(str(BASIC))
    reader = t._values
    name = "Sequential_0.weight"
    steps = t.tensor(name).steps()
    vals = t.tensor(name).values()
    assert list(vals) == steps and len(steps) == 25
    assert reader.file_reads == 0 and reader.range_reads == len(steps)
    assert reader.bytes_read == sum(entries(BASIC, s)[name]["length"] for s in steps)
    for s, v in vals.items():
        np.testing.assert_array_equal(v, protobuf_value(BASIC, s, name))
        assert v.dtype == np.float32 and v.shape == (16, 8) and not v.flags.writeable
        assert t.tensor(name).value(s) is v  # no file touched again
    assert reader.file_reads == 0 and reader.range_reads == len(steps)
    # A second tensor of the same files: each read whole, once; earlier arrays kept.
    bias = t.tensor("Sequential_0.bias").values()
    assert reader.file_reads == len(steps)
    for s in steps:
        np.testing.assert_array_equal(bias[s], protobuf_value(BASIC, s, "Sequential_0.bias"))
    t.tensor("Sequential_2.bias").values()
    assert reader.file_reads == len(steps)
    assert all(t.tensor(name).value(s) is v for s, v in vals.items())


def test_saved_reduction_reads_only_the_reduction_records():
    t = create_trial(str(REDUCTIONS))
    reader = t._values
    doc = entries(REDUCTIONS, 6)
    reductions = [e for n, e in doc.items() if n.startswith("smdebug/reductions/")]
    first = min(e["start_idx"] for e in reductions)
    end = max(e["start_idx"] + e["length"] for e in reductions)
    w = t.tensor("Sequential_0.weight")
    mean = w.reduction_value(6, "mean")
    # One read from the first reduction record to the end of the last one (the 99-byte loss
    # record between them is too small to be worth a second read).
    assert reader.file_reads == 0 and reader.range_reads == 1
    assert reader.bytes_read == end - first
    ref = protobuf_value(REDUCTIONS, 6, "smdebug/reductions/mean/Sequential_0.weight")
    assert mean.dtype == ref.dtype and float(mean) == float(ref)
    # Every other reduction of that step, and the loss, come from the same read.
    for base in ("Sequential_0.weight", "Sequential_0.bias", "Sequential_2.weight"):
        got = t.tensor(base).reduction_values(6)
        assert len(got) == 11
        for (red, is_abs), v in got.items():
            key = f"smdebug/reductions/{'abs_' if is_abs else ''}{red}/{base}"
            assert float(v) == float(protobuf_value(REDUCTIONS, 6, key))
    loss_value = t.tensor("CrossEntropyLoss_output_0").value(6)
    assert float(loss_value) == float(protobuf_value(REDUCTIONS, 6, "CrossEntropyLoss_output_0"))
    assert reader.range_reads == 1 and reader.file_reads == 0
    assert t.tensor("Sequential_0.weight").reduction_value(6, "mean") is mean
    assert len(reductions) == len(doc) - 1


WRITE_WITH_SMDEBUG = r"""
import sys
import numpy as np
from smdebug.core.access_layer.utils import training_has_ended
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.reductions import get_reduction_tensor_name
from smdebug.core.writer import FileWriter
out = sys.argv[1]
cm = CollectionManager()
cm.set_num_workers(1)
cm.export(out, "worker_0_collections.json")
for s in range(3):
    w = FileWriter(trial_dir=out, step=s, worker="worker_0")
    for name, value in (("big", np.arange(300_000, dtype=np.float32) * (s + 1)),
                        ("small", np.array([1.5, -2.0, s], dtype=np.float64))):
        for red, fn in (("mean", np.mean), ("max", np.max)):
            w.write_tensor(tdata=np.asarray(fn(value)), tname=get_reduction_tensor_name(name, red, False),
                           mode=ModeKeys.TRAIN, mode_step=s)
        w.write_tensor(tdata=value, tname=name, mode=ModeKeys.TRAIN, mode_step=s)
    w.close()
training_has_ended(out)
"""

READ_WITH_SMDEBUG = r"""
import json, sys
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
print(json.dumps({f"{n}/{r}/{s}": float(t.tensor(n).reduction_value(s, r))
                  for n in ("big", "small") for r in ("mean", "max") for s in range(3)}))
"""


@pytest.mark.slow
def test_reductions_of_smdebug_files_skip_large_raw_tensors(tmp_path):
    py, why = ref_python()
    if py is None:
        pytest.skip(why)
    out = tmp_path / "written_by_smdebug"
    proc = run_ref(WRITE_WITH_SMDEBUG, str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_ref(READ_WITH_SMDEBUG, str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = json.loads(proc.stdout.strip().splitlines()[-1])
    t = create_trial(str(out))
    reader = t._values
    got = {f"{n}/{r}/{s}": float(t.tensor(n).reduction_value(s, r))
           for n in ("big", "small") for r in ("mean", "max") for s in range(3)}
    assert got == expected
    # Per file: the big tensor's two reductions, then (past 1.2 MB of raw tensor) the small
    # one's: two reads of a few hundred bytes, never the raw tensors.
    assert reader.file_reads == 0 and reader.range_reads == 6
    assert reader.bytes_read < 3 * 1000
    big = t.tensor("big").values()
    for s in range(3):
        np.testing.assert_array_equal(big[s], np.arange(300_000, dtype=np.float32) * (s + 1))
    assert reader.file_reads == 0 and reader.range_reads == 9


# -- damage ---------------------------------------------------------------------------------


@pytest.fixture
def damaged_basic(tmp_path) -> Path:
    """pt_basic with Sequential_0.bias at step 5 broken in its length field and
    Sequential_2.weight at step 7 broken in its footer."""
    root = tmp_path / "pt_basic"
    shutil.copytree(BASIC, root)
    bias = entries(root, 5)["Sequential_0.bias"]
    flip_byte(event_path(root, 5), bias["start_idx"] + 1)
    weight = entries(root, 7)["Sequential_2.weight"]
    flip_byte(event_path(root, 7), weight["start_idx"] + weight["length"] - 1)
    return root


@pytest.mark.parametrize("whole_file_first", [False, True])
def test_damaged_record_reported_for_its_tensor_only(damaged_basic, whole_file_first):
    t = create_trial(str(damaged_basic))
    if whole_file_first:  # files 5 and 7 read whole (a single value) before the bulk reads
        t.tensor("Sequential_0.weight").value(5)
        t.tensor("Sequential_0.weight").value(7)
    with pytest.raises(TensorCorrupted) as e:
        t.tensor("Sequential_0.bias").values()
    assert e.value.step == 5 and e.value.tname == "Sequential_0.bias"
    assert "length CRC" in str(e.value) and "000000000005_worker_0.tfevents" in str(e.value)
    with pytest.raises(TensorCorrupted) as e:
        t.tensor("Sequential_2.weight").value(7)
    assert e.value.step == 7 and "footer" in str(e.value)
    with pytest.raises(TensorCorrupted):
        t.tensor("Sequential_2.weight").values()
    # Every other record of those files, and other steps of those tensors, read fine.
    for name in ("Sequential_0.weight", "Sequential_2.bias", "gradient/Sequential_0.bias"):
        vals = t.tensor(name).values()
        assert list(vals) == t.tensor(name).steps() and len(vals) >= 20
        for s in (5, 7):
            np.testing.assert_array_equal(vals[s], protobuf_value(BASIC, s, name))
    np.testing.assert_array_equal(t.tensor("Sequential_0.bias").value(6),
                                  protobuf_value(BASIC, 6, "Sequential_0.bias"))
    np.testing.assert_array_equal(t.tensor("Sequential_0.bias").value(7),
                                  protobuf_value(BASIC, 7, "Sequential_0.bias"))


def test_damaged_reduction_record(tmp_path):
    root = tmp_path / "pt_reductions"
    shutil.copytree(REDUCTIONS, root)
    mean = entries(root, 9)["smdebug/reductions/mean/Sequential_0.weight"]
    flip_byte(event_path(root, 9), mean["start_idx"] + 10)  # the length CRC
    t = create_trial(str(root))
    w = t.tensor("Sequential_0.weight")
    with pytest.raises(TensorCorrupted) as e:
        w.reduction_value(9, "mean")
    assert e.value.step == 9 and "smdebug/reductions/mean/Sequential_0.weight" in str(e.value)
    assert float(w.reduction_value(9, "max")) == float(
        protobuf_value(REDUCTIONS, 9, "smdebug/reductions/max/Sequential_0.weight"))
    assert float(w.reduction_value(12, "mean")) == float(
        protobuf_value(REDUCTIONS, 12, "smdebug/reductions/mean/Sequential_0.weight"))


# -- S3 -------------------------------------------------------------------------------------


def test_s3_values_one_ranged_get_per_file(s3_endpoint, s3_bucket):
    uri = upload_dir(s3_endpoint.client(), BASIC, s3_bucket, "runs/basic")
    t = create_trial(uri)
    local = create_trial(str(BASIC))
    name = "Sequential_0.weight"
    before = t.requests
    vals = t.tensor(name).values()
    assert t.requests - before == 25 and t._values.file_reads == 0
    assert t._values.bytes_read == sum(entries(BASIC, s)[name]["length"] for s in vals)
    for s, v in local.tensor(name).values().items():
        assert vals[s].dtype == v.dtype
        np.testing.assert_array_equal(vals[s], v)
    # Other tensors fetch the files whole (concurrently), each once.
    for n in t.tensor_names():
        for s, v in t.tensor(n).values().items():
            np.testing.assert_array_equal(v, local.tensor(n).value(s))
    assert t.requests - before == 50 and t._values.file_reads == 25


def test_s3_reductions_and_damage(s3_endpoint, s3_bucket, tmp_path):
    root = tmp_path / "pt_reductions"
    shutil.copytree(REDUCTIONS, root)
    mean = entries(root, 9)["smdebug/reductions/mean/Sequential_0.bias"]
    flip_byte(event_path(root, 9), mean["start_idx"] + 3)
    uri = upload_dir(s3_endpoint.client(), root, s3_bucket, "runs/red")
    t = create_trial(uri)
    b = t.tensor("Sequential_0.bias")
    before = t.requests
    got = {s: float(b.reduction_value(s, "l2")) for s in b.steps()}
    assert got == {s: float(protobuf_value(REDUCTIONS, s, "smdebug/reductions/l2/Sequential_0.bias"))
                   for s in b.steps()}
    assert t.requests - before == len(got) and t._values.file_reads == 0  # one GET per file
    with pytest.raises(TensorCorrupted) as e:
        b.reduction_value(9, "mean")
    assert e.value.step == 9 and "length CRC" in str(e.value)
    assert float(b.reduction_value(9, "max")) == float(
        protobuf_value(REDUCTIONS, 9, "smdebug/reductions/max/Sequential_0.bias"))


def test_s3_read_ranges_merges_adjacent_ranges(s3_endpoint, s3_bucket):
    body = bytes(range(256)) * 4
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="p/f", Body=body)
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="p/g", Body=body[:100])
    storage = S3Storage(f"s3://{s3_bucket}/p")
    rels = ["f", "g", "f", "f", "g"]
    starts = [10, 0, 0, 500, 90]
    lengths = [5, 10, 10, 20, 30]
    got = storage.read_ranges(rels, starts, lengths)
    assert got == [body[10:15], body[0:10], body[0:10], body[500:520], body[90:100]]
    assert storage.requests == 4  # f: [0, 15) and [500, 520); g: [0, 10) and [90, 100)
    got = storage.read_ranges(rels, starts, lengths, max_gap=1000)
    assert got == [body[10:15], body[0:10], body[0:10], body[500:520], body[90:100]]
    assert storage.requests == 6
    with pytest.raises(FileNotFoundError):
        storage.read_ranges(["missing"], [0], [4])
    assert storage.read_ranges(["g"], [200], [8]) == [b""]  # past the end of the object


def test_coalesce_and_slice():
    assert coalesce([30, 0, 10, 100], [5, 10, 10, 1]) == [(0, 20), (30, 35), (100, 101)]
    assert coalesce([30, 0, 10, 100], [5, 10, 10, 1], max_gap=10) == [(0, 35), (100, 101)]
    assert coalesce([0, 2], [10, 3]) == [(0, 10)]  # contained
    spans = [(0, 20), (30, 35)]
    datas = [bytes(range(20)), bytes(range(30, 35))]
    assert slice_ranges(spans, datas, [32, 0, 10], [2, 10, 10]) == [
        bytes([32, 33]), bytes(range(10)), bytes(range(10, 20))]
