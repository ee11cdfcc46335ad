"""smdebug.core's I/O layer (FileWriter, FileReader, locations, index readers, access layer),
imported the way code written for smdebug imports it, against real files, moto's S3 server and
the real smdebug 1.0.34."""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest
from refvenv import ref_python, run_ref

import _smdebug_lite_alias

_smdebug_lite_alias.install()

from smdebug.core.access_layer import (  # noqa: E402
    TSAccessS3,
    has_training_ended,
    training_has_ended,
)
from smdebug.core.access_layer.file import SMDEBUG_TEMP_PATH_SUFFIX, get_temp_path  # noqa: E402
from smdebug.core.access_layer.s3handler import (  # noqa: E402
    DeleteRequest,
    ListRequest,
    ReadObjectRequest,
    S3Handler,
)
from smdebug.core.access_layer.utils import (  # noqa: E402
    check_dir_exists,
    delete_s3_prefixes,
    is_rule_signalled_gracetime_passed,
)
from smdebug.core.index_reader import (  # noqa: E402
    LocalIndexReader,
    ReadIndexFilesCache,
    S3IndexReader,
)
from smdebug.core.locations import (  # noqa: E402
    IndexFileLocationUtils,
    TensorFileLocation,
    TensorLocation,
    TensorShape,
)
from smdebug.core.reader import FileReader  # noqa: E402
from smdebug.core.s3_utils import list_s3_objects  # noqa: E402
from smdebug.core.tensor import StepState, Tensor  # noqa: E402
from smdebug.core.writer import FileWriter  # noqa: E402
from smdebug.exceptions import (  # noqa: E402
    SMDebugRuntimeError,
    SMDebugTypeError,
    SMDebugValueError,
    TensorUnavailableForStep,
)
from smdebug.trials import create_trial  # noqa: E402

import smdebug_lite.trials.tensor as our_tensor  # noqa: E402
from smdebug_lite.config.collection_manager import CollectionManager  # noqa: E402
from smdebug_lite.format.locations import collections_file_name  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402
from smdebug_lite.storage import open_storage  # noqa: E402
from smdebug_lite.writer import PendingStep as StepWriter  # noqa: E402

VALUES = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
    "f64": np.array([np.pi, -1.0]),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "i64": np.array([2**40], dtype=np.int64),
    "bool": np.array([True, False]),
    "scalar0d": np.array(3.5, dtype=np.float32),
}
STEPS = [(0, ModeKeys.TRAIN, 0), (1, ModeKeys.TRAIN, 1), (2, ModeKeys.EVAL, 0)]


def _value(name: str, step: int) -> np.ndarray:
    v = VALUES[name]
    return v if v.dtype == bool else np.asarray(v + step, dtype=v.dtype)


def _write_trial(trial: str, worker: str = "worker_0", end: bool = True) -> None:
    """Three steps written with FileWriter, plus the collections file a trial needs."""
    for step, mode, mode_step in STEPS:
        with FileWriter(trial_dir=trial, step=step, worker=worker) as fw:
            for name in VALUES:
                fw.write_tensor(
                    tdata=_value(name, step), tname=name, mode=mode, mode_step=mode_step
                )
            fw.write_tensor(
                tdata=np.array(["hello", "wörld"]), tname="strings", mode=mode, mode_step=mode_step
            )
            fw.write_shape("only_shape", (4, 5), mode=mode, mode_step=mode_step)
    cm = CollectionManager()
    cm.add("default")
    cm.get("default").tensor_names = list(VALUES)
    open_storage(trial).write_atomic(collections_file_name(worker), cm.export().encode())
    if end:
        training_has_ended(trial)


# ------------------------------------------------------------------------- FileWriter/Reader


def test_file_reader_reads_back_what_file_writer_wrote(tmp_path):
    trial = str(tmp_path / "run")
    with FileWriter(trial_dir=trial, step=20, worker="algo-1") as fw:
        for i in range(4):
            fw.write_tensor(
                tdata=np.ones((4, 4), dtype=np.float32) * i,
                tname=f"foo_{i}",
                mode=ModeKeys.EVAL,
                mode_step=3,
            )
        fw.write_tensor(tdata=[1.5, 2.5], tname="from_list")
        fw.write_tensor(tdata=7, tname="from_scalar", mode=None)
        fname = fw.name()
    assert fname == os.path.join(trial, "events", "000000000020", "000000000020_algo-1.tfevents")
    with FileReader(fname=fname) as fr:
        read = list(fr.read_tensors())
    assert [r[0] for r in read] == ["foo_0", "foo_1", "foo_2", "foo_3", "from_list", "from_scalar"]
    for i, (_, step, value, mode, mode_step) in enumerate(read[:4]):
        assert (step, mode, mode_step) == (20, ModeKeys.EVAL, 3)
        np.testing.assert_array_equal(value, np.ones((4, 4), dtype=np.float32) * i)
        value[0, 0] = -1  # writable, as smdebug's were
    assert read[4][2].tolist() == [1.5, 2.5] and read[4][3:] == (ModeKeys.GLOBAL, 20)
    assert read[5][2].tolist() == [7]
    assert list(FileReader(fname).read_tensors(check=True))[0][0] == "foo_0"


def test_strings_and_every_check_level(tmp_path):
    with FileWriter(trial_dir=str(tmp_path), step=0, worker="w") as fw:
        fw.write_tensor(tdata=np.array(["foo", "barz"]), tname="foo_string")
        fname = fw.name()
    read = list(FileReader(fname).read_tensors())
    assert len(read) == 1 and read[0][2].tolist() == ["foo", "barz"]
    # smdebug's footer is a constant, not the payload CRC: "full" refuses it, no check accepts it.
    with pytest.raises(SMDebugRuntimeError, match="saved_payload_crc"):
        list(FileReader(fname).read_tensors(check="full"))
    assert len(list(FileReader(fname).read_tensors(check=False))) == 1


def test_write_checksum_writes_real_payload_crcs(tmp_path):
    with FileWriter(trial_dir=str(tmp_path), step=1, worker="w", write_checksum=True) as fw:
        fw.write_tensor(tdata=np.arange(3.0), tname="t")
        fname = fw.name()
    assert list(FileReader(fname).read_tensors(check="full"))[0][2].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(SMDebugRuntimeError):
        list(FileReader(fname).read_tensors())


def test_damaged_length_is_reported_with_the_file(tmp_path):
    with FileWriter(trial_dir=str(tmp_path), step=0, worker="w") as fw:
        fw.write_tensor(tdata=np.arange(3.0), tname="t")
        fname = fw.name()
    data = bytearray(open(fname, "rb").read())
    data[0] ^= 0xFF
    open(fname, "wb").write(bytes(data))
    with pytest.raises(SMDebugRuntimeError, match="saved_len_crc") as e:
        list(FileReader(fname).read_tensors())
    assert fname in str(e.value)


def test_scalar_summaries_and_tensorboard_writer(tmp_path):
    with FileWriter(
        trial_dir=str(tmp_path / "tb"),
        step=3,
        worker="w",
        wtype="tensorboard",
        mode=ModeKeys.TRAIN,
        write_checksum=True,
    ) as fw:
        fw.write_scalar_summary("loss", 0.25, global_step=3, timestamp=11.0)
        fw.write_histogram_summary(np.arange(10.0), "hist", global_step=3)
        fname = fw.name()
    assert fname == str(tmp_path / "tb" / "TRAIN" / "000000000003_w.tfevents")
    assert not (tmp_path / "tb" / "index").exists()
    events = FileReader(fname).read_events(check="full")
    assert events == [{"timestamp": 11.0, "step": 3, "name": "loss", "value": 0.25}]
    assert FileReader(fname).read_events(check="full", regex_list=["^nothing"]) == []


def test_writer_errors_name_what_is_wrong(tmp_path):
    fw = FileWriter(trial_dir=str(tmp_path), step=0, worker="w")
    with pytest.raises(SMDebugRuntimeError, match="hasn't been initialized"):
        fw.name()
    with pytest.raises(SMDebugValueError, match="mode can be one of"):
        fw.write_tensor(tdata=np.ones(2), tname="t", mode="TRAIN")
    fw.close()
    assert not any(tmp_path.iterdir())  # nothing written, nothing left behind
    with pytest.raises(SMDebugValueError, match="Writer type not supported"):
        FileWriter(trial_dir=str(tmp_path), step=0, worker="w", wtype="csv")


def test_event_file_is_byte_identical_to_our_hooks_writer(tmp_path):
    """FileWriter is the hooks' encoder: same bytes, same index entries, for the same input."""
    trial = str(tmp_path / "fw")
    with FileWriter(trial_dir=trial, step=5, worker="worker_0") as fw:
        for name, value in VALUES.items():
            fw.write_tensor(
                tdata=value, tname=name, mode=ModeKeys.TRAIN, mode_step=2, timestamp=1234.5
            )
    sw = StepWriter(5, "worker_0", ModeKeys.TRAIN, 2)
    for name, value in VALUES.items():
        sw.add_tensor(name, value, wall_time=1234.5)
    chunks, doc = sw.encode()
    event = os.path.join(trial, sw.event_file_name)
    assert open(event, "rb").read() == b"".join(bytes(c) for c in chunks)
    index = json.load(open(os.path.join(trial, sw.index_file_name)))
    assert index == json.loads(doc.to_json())
    assert index["meta"] == {
        "mode": "TRAIN",
        "mode_step": 2,
        "event_file_name": "events/000000000005/000000000005_worker_0.tfevents",
    }
    assert not [
        p for p in os.listdir(os.path.dirname(event)) if p.endswith(SMDEBUG_TEMP_PATH_SUFFIX)
    ]
    assert get_temp_path("/a/b") == "/a/b" + SMDEBUG_TEMP_PATH_SUFFIX


def test_our_trial_reads_file_writer_output(tmp_path):
    trial = str(tmp_path / "run")
    _write_trial(trial)
    t = create_trial(trial)
    assert sorted(t.tensor_names()) == sorted([*VALUES, "strings", "only_shape"])
    assert t.steps() == [0, 1, 2]
    assert t.steps(mode=ModeKeys.EVAL) == [0] and t.mode(2) == ModeKeys.EVAL
    for name in VALUES:
        for step, mode, mode_step in STEPS:
            got = t.tensor(name).value(mode_step, mode=mode)
            np.testing.assert_array_equal(got, _value(name, step), strict=True)  # int8 stays int8
    assert t.tensor("strings").value(1).tolist() == ["hello", "wörld"]
    assert t.tensor("only_shape").shape(0) == (4, 5)


# ------------------------------------------------------------------------------ smdebug 1.0.34

REF_READS = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from smdebug.trials import create_trial
from smdebug.core.reader import FileReader
t = create_trial(sys.argv[1])
out = {"names": sorted(t.tensor_names()), "steps": t.steps(),
       "modes": {str(s): [t.mode(s).name, t.mode_step(s)] for s in t.steps()}, "values": {}}
for n in ["f32", "f64", "i64", "bool", "scalar0d"]:
    for s in t.tensor(n).steps():
        v = t.tensor(n).value(s)
        out["values"][f"{n}@{s}"] = [v.tolist(), str(v.dtype)]
out["strings"] = t.tensor("strings").value(0).tolist()
out["shape"] = list(t.tensor("only_shape").shape(1))
out["file"] = [[n, s, v.tolist(), m.name, ms]
               for n, s, v, m, ms in FileReader(sys.argv[2]).read_tensors() if n in ("f32", "i64")]
print(json.dumps(out))
"""

REF_WRITES = r"""
import sys, logging
logging.disable(logging.CRITICAL)
import numpy as np
from smdebug.core.writer import FileWriter
from smdebug.core.modes import ModeKeys
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.access_layer.utils import training_has_ended
for step in range(2):
    with FileWriter(trial_dir=sys.argv[1], step=step, worker="worker_0") as fw:
        fw.write_tensor(tdata=np.arange(4, dtype=np.float32) + step, tname="a", mode=ModeKeys.TRAIN,
                        mode_step=step)
        fw.write_tensor(tdata=np.array([step], dtype=np.int64), tname="b", mode=ModeKeys.TRAIN,
                        mode_step=step)
cm = CollectionManager()
cm.add("default")
cm.export(sys.argv[1], "worker_0_collections.json")
training_has_ended(sys.argv[1])
"""


def _run_ref_ok(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run `code` under smdebug 1.0.34 (skipped when its venv cannot be built); it must succeed."""
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    proc = run_ref(code, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.reference
def test_smdebug_1_0_34_reads_what_file_writer_wrote(tmp_path):
    trial = str(tmp_path / "run")
    _write_trial(trial)
    event = TensorFileLocation(1, "worker_0").get_file_location(trial_dir=trial)
    proc = _run_ref_ok(REF_READS, trial, event)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["names"] == sorted([*VALUES, "strings", "only_shape"])
    assert out["steps"] == [0, 1, 2]
    assert out["modes"] == {"0": ["TRAIN", 0], "1": ["TRAIN", 1], "2": ["EVAL", 0]}
    for name in ["f32", "f64", "i64", "bool", "scalar0d"]:
        for step, _, _ in STEPS:
            expected = _value(name, step)
            assert out["values"][f"{name}@{step}"] == [expected.tolist(), str(expected.dtype)]
    assert out["strings"] == ["hello", "wörld"]
    assert out["shape"] == [4, 5]
    assert out["file"] == [
        ["f32", 1, _value("f32", 1).tolist(), "TRAIN", 1],
        ["i64", 1, _value("i64", 1).tolist(), "TRAIN", 1],
    ]


@pytest.mark.reference
def test_we_read_what_smdebug_1_0_34_file_writer_wrote(tmp_path):
    trial = str(tmp_path / "ref")
    _run_ref_ok(REF_WRITES, trial)
    assert has_training_ended(trial)
    event = TensorFileLocation(1, "worker_0").get_file_location(trial_dir=trial)
    read = [(n, s, v.tolist(), m, ms) for n, s, v, m, ms in FileReader(event).read_tensors()]
    assert read == [
        ("a", 1, [1.0, 2.0, 3.0, 4.0], ModeKeys.TRAIN, 1),
        ("b", 1, [1], ModeKeys.TRAIN, 1),
    ]
    t = create_trial(trial)
    assert t.steps() == [0, 1]
    assert t.tensor("a").value(1).tolist() == [1.0, 2.0, 3.0, 4.0]
    reader = LocalIndexReader(trial)
    data, _ = reader.load_tensor_data_from_index_files()
    loc = data["b"][0]["worker_0"]["tensor_location"]
    assert reader.fetch_tensor_value(loc).tolist() == [0]


# -------------------------------------------------------------------------------- locations


def test_index_file_location_round_trips():
    key = IndexFileLocationUtils.get_index_key_for_step("s3://b/run", 1234, "worker_3")
    assert key == "s3://b/run/index/000000001/000000001234_worker_3.json"
    assert IndexFileLocationUtils.parse_step_from_index_file_name(key) == 1234
    assert IndexFileLocationUtils.get_prefix_from_index_file(key) == "s3://b/run"
    assert IndexFileLocationUtils.get_index_prefix_for_step(999) == "000000000"
    assert IndexFileLocationUtils.next_index_prefix_for_step(999) == "000000001"
    assert IndexFileLocationUtils.next_index_prefix_for_step(1000) == "000000002"
    assert IndexFileLocationUtils.get_index_path("/tmp/run") == "/tmp/run/index"
    assert (
        IndexFileLocationUtils.get_step_from_idx_filename("trial_000000000042_worker_0.json") == 42
    )
    for step in (0, 7, 999, 1000, 123456789):
        key = IndexFileLocationUtils.get_index_key_for_step("", step, "w")
        assert (
            key.startswith("index/")
            and IndexFileLocationUtils.parse_step_from_index_file_name(key) == step
        )
    loc = TensorFileLocation(step_num=12, worker_name="worker_1")
    path = loc.get_file_location(trial_dir="/t")
    assert path == "/t/events/000000000012/000000000012_worker_1.tfevents"
    assert loc.get_file_location() == "events/000000000012/000000000012_worker_1.tfevents"
    back = TensorFileLocation.load_filename(path)
    assert (back.step_num, back.worker_name) == (12, "worker_1")
    assert TensorFileLocation.match_regex("/t/index/000000000/000000000012_worker_1.json") is None
    assert TensorFileLocation.get_step_dir_path("/t", 5) == "/t/events/000000000005"
    assert TensorLocation("t", "TRAIN", "3", "e", 10, 20, "w").to_dict() == {
        "tensorname": "t",
        "start_idx": 10,
        "length": 20,
    }
    assert TensorShape("t", "TRAIN", 3, [2, 3]).to_dict() == {
        "tensorname": "t",
        "originalname": "t",
        "shape": (2, 3),
    }


def test_tensor_module_reexports_our_classes():
    assert StepState is our_tensor.StepState and Tensor is our_tensor.Tensor


# ------------------------------------------------------------------------- end of training


@pytest.fixture(params=["local", "s3"])
def run_dir(request, tmp_path, monkeypatch):
    """(a trial location, a function naming what is in it), on local disk and on S3."""
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    if request.param == "local":
        local = tmp_path / "run"
        return str(local), lambda: sorted(os.listdir(local))
    s3 = request.getfixturevalue("s3_endpoint")
    bucket = s3.new_bucket()

    def names() -> list[str]:
        listing = s3.client().list_objects_v2(Bucket=bucket, Prefix="run/")
        return sorted(o["Key"][len("run/") :] for o in listing.get("Contents", ()))

    return f"s3://{bucket}/run", names


def test_training_end_marker(run_dir):
    trial, names = run_dir
    assert has_training_ended(trial) is False and check_dir_exists(trial) is False
    open_storage(trial).write_atomic("a", b"")
    assert has_training_ended(trial) is False and check_dir_exists(trial) is False
    training_has_ended(trial)
    assert has_training_ended(trial) is True and check_dir_exists(trial) is True
    training_has_ended(trial)  # a second worker marking the end is fine
    assert names() == ["a", "training_job_end.ts"]  # no temporary file left behind


def test_each_helper_has_one_home():
    """smdebug exposed these under several module names; each name is the one implementation."""
    import smdebug.core.access_layer.file as al_file
    import smdebug.core.access_layer.s3handler as al_s3handler
    import smdebug.core.access_layer.utils as al_utils
    import smdebug.core.tfevent.util as tfevent_util
    import smdebug.core.utils as core_utils

    assert core_utils.check_dir_exists is al_utils.check_dir_exists is check_dir_exists
    assert al_file.ensure_dir is core_utils.ensure_dir
    assert al_s3handler.is_s3 is al_utils.is_s3 is core_utils.is_s3
    assert tfevent_util.make_numpy_array is core_utils.make_numpy_array
    with pytest.raises(SMDebugTypeError, match="_make_numpy_array does not support the type"):
        tfevent_util.make_numpy_array(None)  # smdebug 1.0.34's message


def test_no_end_marker_on_a_sagemaker_job(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    training_has_ended(str(tmp_path))
    assert has_training_ended(str(tmp_path)) is False


def test_rule_stop_signal_grace_time(tmp_path, monkeypatch):
    assert is_rule_signalled_gracetime_passed(str(tmp_path)) is False
    monkeypatch.setenv("SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE", "stop.signal")
    assert is_rule_signalled_gracetime_passed(str(tmp_path)) is False  # no file yet
    signal = tmp_path / "stop.signal"
    signal.write_text(str(int(time.time())))
    assert is_rule_signalled_gracetime_passed(str(tmp_path)) is False  # within 60 s
    monkeypatch.setenv("rule_stop_grace_time_secs", "0")
    signal.write_text(str(int(time.time()) - 5))
    assert is_rule_signalled_gracetime_passed(str(tmp_path)) is True
    signal.write_text("not a time")
    assert is_rule_signalled_gracetime_passed(str(tmp_path)) is True


def test_s3_training_end_other_prefixes_and_delete(s3_endpoint, monkeypatch):
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    bucket = s3_endpoint.new_bucket()
    TSAccessS3(bucket_name=bucket, key_name="run/a").close()
    trial = f"s3://{bucket}/run"
    training_has_ended(trial)
    assert has_training_ended(f"s3://{bucket}/other") is False
    assert has_training_ended("s3://no-such-bucket-for-smdebug/run") is False
    assert check_dir_exists("s3://no-such-bucket-for-smdebug/run") is False
    delete_s3_prefixes(bucket, "run")
    assert has_training_ended(trial) is False
    assert "Contents" not in s3_endpoint.client().list_objects_v2(Bucket=bucket)


# ---------------------------------------------------------------------------------------- S3


def test_ts_access_s3_creates_its_bucket_and_s3handler_reads_lists_deletes(s3_endpoint):
    bucket = f"smd-new-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    f = TSAccessS3(bucket, "objs//text", binary=False)
    assert f.write("a" * 100) == [0, 100]
    f.write("b" * 200)
    f.write("c" * 300)
    f.close()
    for i in (0, 3, 7, 11):
        g = TSAccessS3(bucket, f"list/{i:02d}")
        g.write(b"x")
        g.close()
    path = f"s3://{bucket}/objs/text"
    got = S3Handler.get_objects(
        [
            ReadObjectRequest(path),
            ReadObjectRequest(path, start=100),
            ReadObjectRequest(path, start=100, length=200),
            ReadObjectRequest(f"s3://{bucket}/objs/missing"),
        ]
    )
    assert got[0] == b"a" * 100 + b"b" * 200 + b"c" * 300
    assert got[1] == b"b" * 200 + b"c" * 300
    assert got[2] == b"b" * 200
    assert got[3] is None
    files = S3Handler.list_prefixes(
        [
            ListRequest(Bucket=bucket, Prefix="list"),
            ListRequest(Bucket=bucket, Prefix="", Delimiter="/"),
            ListRequest(Bucket=bucket, Prefix="list", StartAfter="list/03"),
            ListRequest(Bucket=bucket, Prefix="list/0"),
        ]
    )
    assert len(files[0]) == 4
    assert files[1] == ["list/", "objs/"]
    assert files[2] == ["list/07", "list/11"]
    assert len(files[3]) == 3
    keys, token = list_s3_objects(bucket, "list/")
    assert keys == ["list/00", "list/03", "list/07", "list/11"] and token == "list/11"
    assert list_s3_objects(bucket, "list/", start_after_key=token) == ([], None)
    S3Handler.delete_prefix(path=f"s3://{bucket}/list")
    assert S3Handler.list_prefix(ListRequest(bucket, "list")) == []
    S3Handler.delete_prefix(delete_request=DeleteRequest(Bucket=bucket, Prefix="objs"))
    assert S3Handler.list_prefix(ListRequest(bucket, "")) == []
    with pytest.raises(Exception, match="not an S3 location"):
        S3Handler.delete_prefix(path="/tmp/x")


def test_file_writer_on_s3_and_s3_index_reader(s3_endpoint, monkeypatch):
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    bucket = s3_endpoint.new_bucket()
    trial = f"s3://{bucket}/jobs/run"
    _write_trial(trial, end=False)
    event = TensorFileLocation(2, "worker_0").get_file_location(trial_dir=trial)
    with FileReader(event) as fr:  # closing it must not touch the object (smdebug's emptied it)
        read = {n: (s, v, m, ms) for n, s, v, m, ms in fr.read_tensors()}
    assert read["f64"][0] == 2 and read["f64"][2:] == (ModeKeys.EVAL, 0)
    np.testing.assert_array_equal(read["f64"][1], _value("f64", 2))

    reader = S3IndexReader(trial)
    index_files, token = reader.list_index_files()
    assert index_files == [
        f"jobs/run/index/000000000/00000000000{s}_worker_0.json" for s in range(3)
    ]
    assert token == index_files[-1]
    responses, steps, token, workers = reader.read_index_files(None, range_steps=(1, None))
    assert steps == [1, 2] and workers == ["worker_0", "worker_0"] and len(responses) == 2
    assert reader.read_index_files(None, range_steps=(1, None))[1] == []  # already read
    data, _ = S3IndexReader(trial).load_tensor_data_from_index_files()
    assert sorted(data["f32"]) == [0, 1, 2]
    loc = data["f32"][2]["worker_0"]["tensor_location"]
    assert loc.event_file_name == event and loc.mode == ModeKeys.EVAL and loc.mode_step == 0
    np.testing.assert_array_equal(reader.fetch_tensor_value(loc), _value("f32", 2))
    assert data["only_shape"][1]["worker_0"]["tensor_shape"].shape == (4, 5)

    training_has_ended(trial)
    t = create_trial(trial)
    assert t.steps() == [0, 1, 2]
    np.testing.assert_array_equal(t.tensor("i8").value(1), _value("i8", 1))
    np.testing.assert_array_equal(t.tensor("f64").value(0, mode=ModeKeys.EVAL), _value("f64", 2))


# ----------------------------------------------------------------------------- index readers


def test_local_index_reader(tmp_path, monkeypatch):
    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.01")
    trial = str(tmp_path / "run")
    _write_trial(trial)
    reader = LocalIndexReader(trial)
    files = reader.list_index_files()
    assert [IndexFileLocationUtils.parse_step_from_index_file_name(f) for f in files] == [0, 1, 2]
    responses, steps, token, workers = reader.read_index_files(None)
    assert steps == [0, 1, 2] and token == files[-1] and workers == ["worker_0"] * 3
    assert reader.read_index_files(token)[1] == []
    data, token = LocalIndexReader(trial).load_tensor_data_from_index_files(range_steps=(0, 2))
    assert sorted(data["i64"]) == [0, 1]
    loc = data["i64"][1]["worker_0"]["tensor_location"]
    assert reader.fetch_tensor_value(loc).tolist() == _value("i64", 1).tolist()
    assert len(reader.list_event_files()) == 3
    assert reader.list_event_files(reader.list_event_files()[1]) == reader.list_event_files()[1:]

    # An indexed event file that is gone, in a trial whose training ended: reported at once.
    os.remove(loc.event_file_name)
    with pytest.raises(TensorUnavailableForStep):
        reader.fetch_tensor_value(loc)


def test_read_index_files_cache_evicts_only_names_before_the_key():
    cache = ReadIndexFilesCache()
    cache.cache_limit = 3
    for i in range(5):
        cache.add(f"index/{i:03d}.json", "index/003.json")
    assert not cache.has_not_read("index/004.json")
    assert cache.has_not_read("index/000.json")  # evicted: sorts before the start-after key
    assert not cache.has_not_read("index/003.json")
