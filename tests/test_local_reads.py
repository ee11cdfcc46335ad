"""Batched local reads: the helper the trial uses for index and event files."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from smdebug_lite.format.step_index import parse_step_index
from smdebug_lite.storage import local_reads
from smdebug_lite.storage.local_reads import read_many


def _files(root, n: int) -> list[str]:
    rels = []
    for i in range(n):
        rel = f"d{i % 7}/f{i}.bin"
        os.makedirs(root / f"d{i % 7}", exist_ok=True)
        (root / rel).write_bytes(bytes([i % 256]) * (10 + i % 50))
        rels.append(rel)
    return rels


@pytest.mark.parametrize("n", [3, local_reads.PARALLEL_MIN + 5])
def test_whole_files_and_ranges_in_order(tmp_path, n):
    rels = _files(tmp_path, n)
    whole = read_many(str(tmp_path), rels)
    assert whole == [(tmp_path / r).read_bytes() for r in rels]
    parts = read_many(str(tmp_path), rels, [2] * n, [5] * n)
    assert parts == [(tmp_path / r).read_bytes()[2:7] for r in rels]
    # A range past the end is short, not padded.
    assert read_many(str(tmp_path), rels[:1], [8], [100]) == [(tmp_path / rels[0]).read_bytes()[8:]]


@pytest.mark.parametrize("n", [3, local_reads.PARALLEL_MIN + 5])
def test_missing_file_names_its_full_path_and_leaks_no_fd(tmp_path, n):
    rels = _files(tmp_path, n)
    os.unlink(tmp_path / rels[n // 2])
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError) as info:
        read_many(str(tmp_path), rels)
    assert info.value.filename == os.path.join(str(tmp_path), rels[n // 2])
    assert len(os.listdir("/proc/self/fd")) == before


def _read_in_child(root: str, rels: list[str], q) -> None:
    q.put(len(read_many(root, rels)))


def test_forked_child_gets_its_own_threads(tmp_path):
    """The pool is made in the parent; a forked child must not hand work to threads it lacks."""
    rels = _files(tmp_path, local_reads.PARALLEL_MIN + 5)
    assert len(read_many(str(tmp_path), rels)) == len(rels)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(str(tmp_path), rels, q))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0 and q.get(timeout=5) == len(rels)


def test_index_json_beyond_the_fast_parser_falls_back_to_json():
    """orjson refuses what Python's json writes for a NaN; such a file still parses (via json)."""
    text = (b'{"meta": {"mode": "TRAIN", "mode_step": 3, "event_file_name": "e"}, "tensor_payload": '
            b'[{"tensorname": "w", "start_idx": 0, "length": 10, "x": NaN}],'
            b' "shape_payload": []}')
    si = parse_step_index(text, "index/000000000/000000000003_worker_0.json")
    assert si.step == 3 and si.entries["w"]["x"] != si.entries["w"]["x"]  # NaN
