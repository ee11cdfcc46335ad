"""Damaged event files: a clear TensorCorrupted naming file, step and tensor, while every other
record and step stays readable. smdebug read whatever bytes were there (or crashed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from trial_builders import simple_tensors, write_job

from smdebug_lite.exceptions import TensorCorrupted
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.trials import create_trial


def event_path(root: Path, step: int) -> Path:
    return root / "events" / f"{step:012d}" / f"{step:012d}_worker_0.tfevents"


def index_entries(root: Path, step: int) -> dict[str, dict]:
    doc = json.loads((root / "index" / "000000000" / f"{step:012d}_worker_0.json").read_text())
    return {e["tensorname"]: e for e in doc["tensor_payload"]}


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def job(tmp_path) -> Path:
    root = tmp_path / "job"
    write_job(str(root), range(5))
    return root


@pytest.mark.parametrize("touch_first", [False, True])
def test_flipped_byte_in_one_record(job, touch_first):
    entry = index_entries(job, 2)["b"]
    flip_byte(event_path(job, 2), entry["start_idx"] + entry["content_offset"] + 1)
    t = create_trial(str(job))
    if touch_first:  # the file is then read whole (second record wanted) before the bad one
        t.tensor("w").value(2)
        t.tensor("loss").value(2)
    with pytest.raises(TensorCorrupted) as e:
        t.tensor("b").value(2)
    msg = str(e.value)
    assert "000000000002_worker_0.tfevents" in msg and "step 2" in msg and "Tensor b" in msg
    assert "CRC32C" in msg and e.value.step == 2 and e.value.tname == "b"
    # Same file, other records; other steps of the same tensor: all fine.
    np.testing.assert_array_equal(t.tensor("w").value(2), simple_tensors(2)["w"])
    assert float(t.tensor("loss").value(2)) == pytest.approx(1 / 3)
    assert t.tensor("b").value(3).tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(TensorCorrupted):
        t.tensor("b").values()
    with pytest.raises(TensorCorrupted):
        t.tensor("b").reduction_value(2, "mean")


@pytest.mark.parametrize("warm", [False, True])
def test_truncated_file(job, warm):
    entries = index_entries(job, 3)
    order = sorted(entries.values(), key=lambda e: e["start_idx"])
    cut = order[1]["start_idx"] + 10  # first record whole, second cut, third gone
    path = event_path(job, 3)
    path.write_bytes(path.read_bytes()[:cut])
    t = create_trial(str(job))
    first, second, third = (e["tensorname"] for e in order)
    if warm:
        t.tensor(first).value(3)
    assert t.tensor(first).value(3) is not None
    for name in (second, third):
        if INLINE_KEY in entries[name]:  # a scalar: its value is in its index entry
            assert t.tensor(name).value(3).tobytes() == simple_tensors(3)[name].tobytes()
            continue
        with pytest.raises(TensorCorrupted) as e:
            t.tensor(name).value(3)
        assert "truncated" in str(e.value) and e.value.step == 3
    for s in (0, 1, 2, 4):
        np.testing.assert_array_equal(t.tensor("w").value(s), simple_tensors(s)["w"])


def test_whole_file_path_and_ranged_path_agree_on_damage(job, monkeypatch):
    entry = index_entries(job, 1)["w"]
    flip_byte(event_path(job, 1), entry["start_idx"] + entry["length"] - 6)
    monkeypatch.setenv("SMDEBUG_READER_WHOLE_FILE_MB", "0")  # every read is a ranged read
    t = create_trial(str(job))
    with pytest.raises(TensorCorrupted):
        t.tensor("w").value(1)
    assert t.tensor("b").value(1).tolist() == [1.0, 1.0, 1.0]
    assert t._values.file_reads == 0 and t._values.range_reads >= 1


def test_damaged_smdebug_written_file(tmp_path):
    """Files from real smdebug have no CRC in the index: the TFRecord framing is checked."""
    root = tmp_path / "pt_basic"
    shutil.copytree(GOLDEN_DIR / "pt_basic", root)
    entries = index_entries(root, 5)
    bias = entries["Sequential_0.bias"]
    flip_byte(event_path(root, 5), bias["start_idx"] + 2)  # inside the length field
    t = create_trial(str(root))
    with pytest.raises(TensorCorrupted) as e:
        t.tensor("Sequential_0.bias").value(5)
    assert "length CRC" in str(e.value)
    assert t.tensor("Sequential_0.weight").value(5).shape == (16, 8)
    assert t.tensor("Sequential_0.bias").value(6).shape == (16,)
    path = event_path(root, 7)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(TensorCorrupted) as e:
        t.tensor("CrossEntropyLoss_output_0").value(7)
    assert "truncated" in str(e.value) and "000000000007" in str(e.value)
