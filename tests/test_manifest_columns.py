"""The version 2 manifest: a trial opens from the chunks' columns without parsing documents,
parses them on demand through a bounded chunk cache, and answers every question as the per-step
files do (evicted chunks, appended steps, several workers, modes, damaged index files, damaged
chunks, a version 1 manifest)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_manifest import snapshot, write_steps
from test_s3_trial import upload_dir

from smdebug_lite.exceptions import IndexFileCorrupted
from smdebug_lite.format import manifest
from smdebug_lite.format.locations import index_file_name
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial


@pytest.fixture(autouse=True)
def parse_on_demand(monkeypatch):
    """These trials are small enough to be parsed whole at open; the tests here are about
    the on-demand path that longer trials take."""
    monkeypatch.setenv("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB", "0")


def full_snapshot(t) -> dict:
    """`snapshot` plus every tensor's values() per mode and worker (errors by type)."""
    out = snapshot(t)
    for name in out["names"]:
        tensor = t.tensor(name)
        for mode in [ModeKeys.GLOBAL, *t.modes()]:
            out[f"steps/{name}/{mode.name}"] = tensor.steps(mode=mode)
            for worker in [None, *t.workers()]:
                try:
                    vals = tensor.values(mode=mode, worker=worker)
                except Exception as e:  # noqa: BLE001 - the same error is expected either way
                    out[f"values/{name}/{mode.name}/{worker}"] = type(e).__name__
                    continue
                out[f"values/{name}/{mode.name}/{worker}"] = {
                    s: (v.dtype.str, v.shape, v.tobytes()) for s, v in vals.items()}
    return out


def open_trial(path: Path, **kwargs):
    return create_trial(str(path), timeout=5, **kwargs)


def plain_copy(tmp_path: Path, steps: range, workers: int = 2) -> Path:
    fresh = tmp_path / "plain"
    write_steps(fresh, steps, workers=workers, end=True)
    return fresh


def compacted(tmp_path: Path, steps: range, chunk_steps: int) -> Path:
    """A trial of `steps` (2 workers, ended) with a manifest of `chunk_steps` per chunk."""
    root = tmp_path / "t"
    write_steps(root, steps, end=True)
    compact_trial(str(root), chunk_steps=chunk_steps)
    return root


def test_open_parses_no_document_and_history_reads_columns(tmp_path):
    root = compacted(tmp_path, range(30), 10)
    t = open_trial(root)
    seg = t.step_table.compacted
    assert seg is not None and len(seg) == 60 and seg.chunk_loads == 0
    assert t.steps() == list(range(30)) and t.tensor("loss").values()
    assert seg.chunk_loads == 0  # the history came from the tensor's columns
    assert full_snapshot(t) == full_snapshot(open_trial(plain_copy(tmp_path, range(30))))


def test_chunk_cache_eviction_gives_the_same_answers(tmp_path, monkeypatch):
    root = compacted(tmp_path, range(40), 5)
    monkeypatch.setenv("SMDEBUG_MANIFEST_CACHE_CHUNKS", "1")
    t = open_trial(root)
    got = full_snapshot(t)
    seg = t.step_table.compacted
    assert seg.cache_chunks == 1 and seg.chunk_loads > len(seg.refs)  # chunks were evicted
    assert got == full_snapshot(open_trial(plain_copy(tmp_path, range(40))))


def test_the_memory_budget_evicts_chunks_and_answers_stay_the_same(tmp_path, monkeypatch):
    root = compacted(tmp_path, range(40), 5)
    monkeypatch.setenv("SMDEBUG_MANIFEST_CACHE_MB", "1")
    t = open_trial(root)
    seg = t.step_table.compacted
    seg.cache_bytes = 1  # below one chunk: only the chunk in use stays
    got = full_snapshot(t)
    assert seg.cache_chunks is None and seg.chunk_loads > len(seg.refs)
    assert seg.cached_chunks == 1 and seg.cached_bytes > 0
    assert got == full_snapshot(open_trial(plain_copy(tmp_path, range(40))))


def test_by_default_a_trial_that_fits_parses_each_chunk_once(tmp_path):
    root = compacted(tmp_path, range(40), 5)
    t = open_trial(root)
    seg = t.step_table.compacted
    for name in sorted(t.tensor_names()):  # a tensor's steps one by one, then the next's
        tensor = t.tensor(name)
        for step in tensor.steps():
            tensor.value(step)
    full_snapshot(t)
    assert seg.chunk_loads <= len(seg.refs)


def test_compacted_mid_run_then_appended_answers_across_the_boundary(tmp_path):
    root = tmp_path / "t"
    write_steps(root, range(12), workers=3)
    write_steps(root, range(12, 14), workers=2)  # the third worker is behind
    first = compact_trial(str(root), chunk_steps=5)
    assert (first.first_step, first.last_step) == (0, 11)
    write_steps(root, range(12, 23), workers=3, end=True)
    t = open_trial(root)
    assert len(t.step_table.compacted) == 36 and t.index_files_read == 33
    assert full_snapshot(t) == full_snapshot(open_trial(plain_copy(tmp_path, range(23), 3)))


def test_modes_and_range_steps(tmp_path):
    root = tmp_path / "t"
    write_steps(root, range(30), end=True, eval_every=3)
    compact_trial(str(root), chunk_steps=7)
    plain = tmp_path / "plain"
    write_steps(plain, range(30), end=True, eval_every=3)
    for kwargs in ({}, {"range_steps": (8, 19)}):
        t = open_trial(root, **kwargs)
        assert t.index_files_read == 0
        assert sorted(m.name for m in t.modes()) == ["EVAL", "TRAIN"]
        assert t.global_step(ModeKeys.EVAL, 4) == open_trial(plain, **kwargs).global_step(
            ModeKeys.EVAL, 4)
        assert full_snapshot(t) == full_snapshot(open_trial(plain, **kwargs))


def test_damaged_index_files_are_reported_the_same_way(tmp_path, caplog):
    root, plain = tmp_path / "t", tmp_path / "plain"
    for r in (root, plain):
        write_steps(r, range(20), end=True)
        (r / index_file_name(7, "worker_1")).write_bytes(b'{"meta": ')
        (r / index_file_name(12, "worker_0")).write_bytes(b"")
    result = compact_trial(str(root), chunk_steps=10)
    assert result.index_files == 40
    caplog.clear()
    t, p = open_trial(root), open_trial(plain)
    assert t.index_files_read == 0 and "Skipping step 7 of worker_1" in caplog.text
    assert sorted(t._index.bad_files) == sorted(p._index.bad_files)
    for trial in (t, p):
        with pytest.raises(IndexFileCorrupted) as e:
            trial.tensor("loss").value(7, worker="worker_1")
        assert (e.value.step, e.value.worker) == (7, "worker_1")
        assert trial.tensor("loss").value(7, worker="worker_0").tobytes()
    assert full_snapshot(t) == full_snapshot(p)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["documents", "tensor section"])
def test_chunk_damaged_after_its_columns_falls_back_to_the_index_files(tmp_path, caplog, where):
    root = tmp_path / "t"
    write_steps(root, range(20), end=True)
    compact_trial(str(root), chunk_steps=10)
    m = manifest.read_head(open_trial(root).storage)
    ref = m.chunks[1]
    path = root / ref.key
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    _flip(path, ref.prefix + 5 if where == "documents" else ref.prefix + header["docs"] + 5)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        t = open_trial(root)  # the columns are intact: the manifest is used
        assert t.index_files_read == 0 and "Not using" not in caplog.text
        got = full_snapshot(t)
    assert "Not using the compacted index chunk" in caplog.text
    assert got == full_snapshot(open_trial(plain_copy(tmp_path, range(20))))


def test_version_1_manifest_is_ignored_until_compacted_again(tmp_path, caplog):
    root = tmp_path / "t"
    write_steps(root, range(10), end=True)
    compact_trial(str(root))
    head = root / manifest.HEAD_KEY
    doc = json.loads(head.read_bytes().split(b"\n")[0])
    doc["version"] = 1
    line = json.dumps(doc, sort_keys=True).encode()
    import hashlib

    head.write_bytes(line + b"\n" + hashlib.sha256(line).hexdigest().encode() + b"\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        t = open_trial(root)
    assert "version 1" in caplog.text and "smdebug-lite compact" in caplog.text
    assert t.index_files_read == 20
    result = compact_trial(str(root))
    assert "replaced an invalid manifest" in result.note and result.index_files_read == 20
    assert json.loads(head.read_bytes().split(b"\n")[0])["version"] == manifest.VERSION
    assert open_trial(root).index_files_read == 0


@pytest.mark.slow
def test_s3_history_reads_one_section_per_chunk(s3_endpoint, s3_bucket, tmp_path):
    write_steps(tmp_path / "t", range(30), workers=3, end=True)
    expected = full_snapshot(open_trial(tmp_path / "t"))
    uri = upload_dir(s3_endpoint.client(), tmp_path / "t", s3_bucket, "runs/cols")
    compact_trial(uri, chunk_steps=10)
    t = create_trial(uri, timeout=5)
    seg = t.step_table.compacted
    assert t.index_files_read == 0 and len(seg.refs) == 3
    before = t.storage.request_counts.get("GET", 0)
    assert len(t.tensor("loss").values()) == 30 and seg.chunk_loads == 0
    assert t.storage.request_counts.get("GET", 0) - before == 3  # a ranged GET per chunk
    assert full_snapshot(t) == expected


def test_trial_opened_from_a_manifest_refreshes_while_written(tmp_path):
    root = tmp_path / "t"
    write_steps(root, range(15))
    compact_trial(str(root), chunk_steps=5)
    t = open_trial(root)
    assert t.steps() == list(range(15)) and not t.loaded_all_steps
    assert len(t.tensor("loss").values()) == 15
    write_steps(root, range(15, 22), end=True)
    t.refresh_data()
    t.wait_for_steps([21])
    assert t.steps() == list(range(22)) and t.index_files_read == 14
    assert full_snapshot(t) == full_snapshot(open_trial(plain_copy(tmp_path, range(22))))


def test_a_bad_cache_setting_warns_and_keeps_the_default(tmp_path, monkeypatch, caplog):
    root = compacted(tmp_path, range(10), 5)
    monkeypatch.setenv("SMDEBUG_MANIFEST_CACHE_CHUNKS", "-1")
    monkeypatch.setenv("SMDEBUG_MANIFEST_CACHE_MB", "lots")
    with caplog.at_level(logging.WARNING):
        t = open_trial(root)
    assert t.step_table.compacted.cache_chunks is None
    assert t.step_table.compacted.cache_bytes == 1024 << 20
    assert "SMDEBUG_MANIFEST_CACHE_CHUNKS='-1'" in caplog.text
    assert "SMDEBUG_MANIFEST_CACHE_MB='lots'" in caplog.text


def test_a_short_trial_is_parsed_at_open_and_a_long_one_on_demand(tmp_path, monkeypatch):
    monkeypatch.delenv("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB")
    root = compacted(tmp_path, range(20), 5)
    t = open_trial(root)
    assert t.step_table.compacted is None and t.index_files_read == 0  # parsed whole, as docs
    assert full_snapshot(t) == full_snapshot(open_trial(plain_copy(tmp_path, range(20))))
    monkeypatch.setenv("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB", "0")
    t = open_trial(root)
    seg = t.step_table.compacted
    assert not seg.parse_at_open and seg.chunk_loads == 0
    assert full_snapshot(t) == full_snapshot(open_trial(plain_copy(tmp_path, range(20))))
