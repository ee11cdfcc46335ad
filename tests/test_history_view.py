"""A tensor's history read in one go (the bulk read over many event files) gives the arrays
that reading step by step gives, when the shape changes between steps too, and one damaged
record is named while the rest stay readable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from trial_builders import simple_tensors, write_job

from smdebug_lite.exceptions import TensorCorrupted
from smdebug_lite.trials import create_trial

STEPS = range(40)


def event_path(root: Path, step: int) -> Path:
    return root / "events" / f"{step:012d}" / f"{step:012d}_worker_0.tfevents"


def one_by_one(root: Path, name: str, steps) -> dict[int, np.ndarray]:
    t = create_trial(str(root))
    return {s: t.tensor(name).value(s) for s in steps}


@pytest.fixture
def job(tmp_path) -> Path:
    root = tmp_path / "job"
    write_job(str(root), STEPS)
    return root


@pytest.mark.parametrize("name", ["w", "b", "loss"])
def test_history_matches_values_read_one_by_one(job, name):
    history = create_trial(str(job)).tensor(name).values()
    alone = one_by_one(job, name, STEPS)
    assert sorted(history) == list(STEPS)
    for s in STEPS:
        expected = simple_tensors(s)[name]
        for arr in (history[s], alone[s]):
            assert isinstance(arr, np.ndarray)
            assert arr.shape == expected.shape and arr.dtype == expected.dtype
            np.testing.assert_array_equal(arr, expected)
        assert not history[s].flags.writeable  # a saved value is not changed through a read


def test_history_of_a_tensor_whose_shape_changes(tmp_path):
    def tensors(s: int) -> dict[str, np.ndarray]:
        return {"x": np.arange(s % 3 + 1, dtype=np.float32) + s}

    root = tmp_path / "job"
    write_job(str(root), STEPS, tensors)
    history = create_trial(str(root)).tensor("x").values()
    for s in STEPS:
        np.testing.assert_array_equal(history[s], tensors(s)["x"])


def test_one_damaged_record_is_named_and_the_rest_still_read(job):
    doc = json.loads((job / "index" / "000000000" / f"{17:012d}_worker_0.json").read_text())
    w = next(e for e in doc["tensor_payload"] if e["tensorname"] == "w")
    data = bytearray(event_path(job, 17).read_bytes())
    data[w["start_idx"] + w["content_offset"] + 5] ^= 0xFF  # inside w's raw bytes
    event_path(job, 17).write_bytes(bytes(data))
    t = create_trial(str(job))
    names = [n for n in ("w", "b", "loss") if n in t.tensor_names()]
    damaged = []
    for name in names:
        try:
            t.tensor(name).values()
        except TensorCorrupted as e:
            assert e.step == 17 and "000000000017_worker_0.tfevents" in str(e)
            damaged.append(name)
    assert damaged == ["w"]
    fresh = create_trial(str(job))
    for name in names:
        for s in (16, 18):
            np.testing.assert_array_equal(fresh.tensor(name).value(s), simple_tensors(s)[name])
