"""Index files in the layout smdebug-lite writes are parsed with their shapes as strings (entries
the garbage collector never tracks), whatever characters the tensor names hold."""

from __future__ import annotations

import gc
import glob
import os

import numpy as np
import pytest
from trial_builders import write_job

from smdebug_lite.format.step_index import _shapes_as_strings, _shapes_searched, parse_step_index
from smdebug_lite.trials import create_trial

NAMES = ["w", "a[0]", "b]", "[c", "d], \"shape\": [1", "e[: 1, [f", "g]}, {\"x\": [2"]


def _tensors(s: int) -> dict[str, np.ndarray]:
    return {name: np.full((i % 3 + 1, 2), s + i, dtype=np.float32) for i, name in
            enumerate(NAMES)} | {"plain": np.arange(4, dtype=np.float64) + s}


@pytest.fixture
def job(tmp_path):
    write_job(str(tmp_path), steps=range(3), tensors_at=_tensors)
    return str(tmp_path)


def _index_files(job: str) -> list[tuple[str, bytes]]:
    return [(os.path.relpath(p, job), open(p, "rb").read())
            for p in sorted(glob.glob(os.path.join(job, "index", "*", "*.json")))]


def test_plain_names_take_the_byte_replace(tmp_path):
    write_job(str(tmp_path), steps=range(2))
    for key, text in _index_files(str(tmp_path)):
        assert _shapes_as_strings(text) == _shapes_searched(text)
        si = parse_step_index(text, key)
        for entry in si.entries.values():
            assert isinstance(entry["shape"], str) and not gc.is_tracked(entry)


def test_brackets_in_names(job):
    for key, text in _index_files(job):
        si = parse_step_index(text, key)
        assert set(si.entries) == set(NAMES) | {"plain"}
        for entry in si.entries.values():
            assert isinstance(entry["shape"], str) and not gc.is_tracked(entry)
    tr = create_trial(job)
    for name, arr in _tensors(2).items():
        np.testing.assert_array_equal(tr.tensor(name).value(2), arr)
        assert tr.tensor(name).shape(1) == arr.shape
        assert sorted(tr.tensor(name).values()) == [0, 1, 2]
