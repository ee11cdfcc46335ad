"""The manifest format and the reader's use of it: inline values round trip; a trial compacted
mid-run and then appended to reads every step; a damaged or stale manifest is detected, warned
about and ignored (the per-step files answer instead)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from smdebug_lite.config import CollectionManager
from smdebug_lite.format import manifest
from smdebug_lite.format.index_file import IndexDocument, TensorEntry
from smdebug_lite.format.inline_value import encode_inline
from smdebug_lite.format.locations import (
    END_OF_JOB_FILE,
    collections_file_name,
    event_file_name,
    index_file_name,
)
from smdebug_lite.format.tensor_codec import encode_tensor_record
from smdebug_lite.index import IndexReader, inline_value
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import open_storage
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction.compact import compact_trial, write_head


def value_at(name: str, step: int, worker: int) -> np.ndarray:
    """Deterministic values: scalars, a vector and an integer, all depending on step/worker."""
    if name == "vec":
        return np.arange(4, dtype=np.float64) * step + worker
    if name == "count":
        return np.array([step * 3 + worker], dtype=np.int64)
    return np.array(np.sin(step + worker + len(name)), dtype=np.float32)


NAMES = ("loss", "acc", "vec", "count", "smdebug/reductions/mean/vec")  # the last: scalar


def write_steps(root: str | Path, steps: range, workers: int = 2, end: bool = False,
                names: tuple[str, ...] = NAMES, eval_every: int = 4) -> None:
    """A trial written directly in the file format (the writer classes are not needed)."""
    root = str(root)
    for w in range(workers):
        worker = f"worker_{w}"
        coll = os.path.join(root, collections_file_name(worker))
        if not os.path.exists(coll):
            os.makedirs(os.path.dirname(coll), exist_ok=True)
            Path(coll).write_text(CollectionManager(framework="pytorch",
                                                    num_workers=workers).export())
        for s in steps:
            mode = ModeKeys.EVAL if s % eval_every == eval_every - 1 else ModeKeys.TRAIN
            entries, chunks, offset = [], [], 0
            for name in names:
                rec = encode_tensor_record(name, value_at(name, s, w), s, mode.value, s // 2,
                                           1000.0 + s)
                chunks += rec.chunks
                entries.append(TensorEntry(name, offset, rec.length, rec.crc, rec.stored_dtype,
                                           rec.shape, rec.content_offset, rec.orig_dtype))
                offset += rec.length
            doc = IndexDocument(s, worker, mode, s // 2, event_file_name(s, worker), entries)
            for rel, data in ((event_file_name(s, worker), b"".join(bytes(c) for c in chunks)),
                              (index_file_name(s, worker), doc.to_json().encode())):
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).write_bytes(data)
    if end:
        Path(root, END_OF_JOB_FILE).write_bytes(b"")


@pytest.fixture(autouse=True)
def parse_on_demand(monkeypatch):
    """Open these small trials the way long ones open (columns, documents parsed on demand);
    a short trial's whole parse at open is checked in test_manifest_columns.py."""
    monkeypatch.setenv("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB", "0")


def snapshot(t) -> dict:
    """Everything the Trial API answers about a trial, values as bytes."""
    out: dict = {"steps": t.steps(), "modes": sorted(m.name for m in t.modes()),
                 "workers": sorted(t.workers()), "names": sorted(t.tensor_names())}
    for mode in t.modes():
        out[f"steps/{mode.name}"] = t.steps(mode=mode)
    for name in out["names"]:
        tensor = t.tensor(name)
        for s in tensor.steps():
            for w in tensor.workers(s):
                v = tensor.value(s, worker=w)
                out[f"{name}/{s}/{w}"] = (v.dtype.str, v.shape, v.tobytes())
                out[f"{name}/{s}/{w}/max"] = tensor.reduction_value(s, "max", worker=w).tobytes()
    return out


def open_trial(path: str):
    return create_trial(path, timeout=5)


def test_inline_values_round_trip_exactly():
    for arr in (np.array(np.nan, dtype=np.float32), np.array([2**62], dtype=np.int64),
                np.array(True), np.array([[1.5]], dtype=np.float16), np.array(-0.0)):
        text = encode_inline(arr)
        back = inline_value({"inline": text})
        assert back.dtype == arr.dtype and back.shape == arr.shape
        assert back.tobytes() == arr.tobytes()
    assert encode_inline(np.arange(2)) is None
    assert encode_inline(np.array(["a"])) is None
    assert inline_value({"inline": "float32|x|00"}) is None
    assert inline_value({}) is None


def test_compacted_trial_answers_like_per_step_files(tmp_path):
    write_steps(tmp_path, range(25), end=True)
    before = snapshot(open_trial(str(tmp_path)))
    result = compact_trial(str(tmp_path), chunk_steps=10)
    assert (result.first_step, result.last_step, result.index_files) == (0, 24, 50)
    assert result.chunks_written == 3 and result.index_files_read == 50
    assert "steps 0..24" in str(result)
    t = open_trial(str(tmp_path))
    assert t.index_files_read == 0  # every step came from the manifest
    assert snapshot(t) == before


def test_inlined_values_equal_what_the_event_files_hold(tmp_path):
    write_steps(tmp_path, range(6), end=True)
    result = compact_trial(str(tmp_path))
    assert result.values_inlined == 6 * 2 * 4  # loss, acc, count and the reduction; not vec
    reader = IndexReader(open_storage(str(tmp_path)))
    assert reader.poll() == [] and len(reader.compacted) == 12  # columns, nothing parsed
    docs = [reader.compacted.step_index(i) for i in range(12)]  # parsed on demand
    for si in docs:
        w = int(si.worker[-1])
        assert inline_value(si.entries["loss"]).tobytes() == value_at("loss", si.step, w).tobytes()
        assert inline_value(si.entries["count"]).tobytes() == value_at("count", si.step,
                                                                       w).tobytes()
        assert inline_value(si.entries["vec"]) is None
        mean = si.reductions["vec"][("mean", False)]
        assert inline_value(mean).tobytes() == value_at(NAMES[-1], si.step, w).tobytes()


def test_compacted_mid_run_then_appended(tmp_path):
    write_steps(tmp_path, range(12))
    # Worker 1 is behind: only the steps both workers finished are compacted.
    write_steps(tmp_path, range(12, 15), workers=1)
    first = compact_trial(str(tmp_path), chunk_steps=5)
    assert (first.first_step, first.last_step) == (0, 11)
    write_steps(tmp_path, range(15, 30), workers=1)
    write_steps(tmp_path, range(12, 30), end=True)
    t = open_trial(str(tmp_path))
    assert t.steps() == list(range(30)) and t.index_files_read == 36
    fresh = tmp_path.parent / "plain"
    write_steps(fresh, range(30), end=True)
    assert snapshot(t) == snapshot(open_trial(str(fresh)))
    second = compact_trial(str(tmp_path), chunk_steps=5)
    assert second.chunks_reused == first.chunks_written and second.index_files_read == 36
    assert (second.first_step, second.last_step, second.index_files) == (0, 29, 60)
    t = open_trial(str(tmp_path))
    assert t.index_files_read == 0 and snapshot(t) == snapshot(open_trial(str(fresh)))


def test_range_steps_read_only_the_chunks_they_need(tmp_path):
    write_steps(tmp_path, range(40), end=True)
    compact_trial(str(tmp_path), chunk_steps=10)
    t = create_trial(str(tmp_path), range_steps=(12, 25))
    assert t.steps() == list(range(12, 25)) and t.index_files_read == 0
    plain = tmp_path.parent / "plain"
    write_steps(plain, range(40), end=True)
    assert snapshot(t) == snapshot(create_trial(str(plain), range_steps=(12, 25)))


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("target", ["chunk", "head", "missing-chunk"])
def test_damaged_manifest_is_ignored_with_a_warning(tmp_path, caplog, target):
    write_steps(tmp_path, range(20), end=True)
    expected = snapshot(open_trial(str(tmp_path)))
    compact_trial(str(tmp_path), chunk_steps=10)
    chunk = sorted((tmp_path / manifest.CHUNK_DIR).iterdir())[1]
    if target == "chunk":
        _flip(chunk, 100)
    elif target == "head":
        _flip(tmp_path / manifest.HEAD_KEY, 30)
    else:
        chunk.unlink()
    with caplog.at_level(logging.WARNING):
        t = open_trial(str(tmp_path))
    assert "Not using the compacted index" in caplog.text
    assert t.index_files_read == 40 and snapshot(t) == expected


def test_chunk_records_are_checked_against_the_step_range(tmp_path):
    """A chunk whose content does not match the head's step range is refused, even with a
    digest that matches (a head rewritten consistently but wrongly)."""
    write_steps(tmp_path, range(10), end=True)
    compact_trial(str(tmp_path))
    m = manifest.read_head(manifest_storage(tmp_path))
    m.chunks[0] = dataclasses.replace(m.chunks[0], last_step=5)
    m.last_key = "index/000000000/000000000005_worker_1.json"
    write_head(manifest_storage(tmp_path), m)
    with pytest.raises(manifest.ManifestInvalid, match="header last_step=9; expected 5"):
        manifest.read_chunks(manifest_storage(tmp_path), m.chunks)


def manifest_storage(root: Path):
    return open_storage(str(root))


def test_stale_manifest_is_ignored(tmp_path, caplog):
    """The trial was written again after compaction: the last compacted index file changed."""
    write_steps(tmp_path, range(10), end=True)
    compact_trial(str(tmp_path))
    for worker in ("worker_0", "worker_1"):  # worker_1's is the last file compacted
        path = tmp_path / index_file_name(9, worker)
        doc = json.loads(path.read_text())
        doc["meta"]["mode_step"] = 99
        path.write_text(json.dumps(doc))
    with caplog.at_level(logging.WARNING):
        t = open_trial(str(tmp_path))
    assert "stale" in caplog.text and t.index_files_read == 20
    assert t.mode_modestep(9) == (ModeKeys.TRAIN, 99)


def test_index_file_written_inside_the_compacted_range_makes_it_stale(tmp_path, caplog):
    write_steps(tmp_path, range(10), workers=1, end=True)
    compact_trial(str(tmp_path))
    # A second worker's files for covered steps appear afterwards: the manifest no longer
    # describes those steps.
    write_steps(tmp_path, range(10), workers=2, end=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        t = open_trial(str(tmp_path))
    assert "stale" in caplog.text
    assert t.workers() == ["worker_0", "worker_1"] and t.index_files_read == 20
    result = compact_trial(str(tmp_path))
    assert result.index_files == 20 and "stale" in result.note
    assert len(list((tmp_path / manifest.CHUNK_DIR).iterdir())) == 1  # the old chunk removed
    assert open_trial(str(tmp_path)).index_files_read == 0
