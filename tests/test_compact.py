"""Compaction of whole trials: smdebug-written (golden) and generated ones, local and on S3
(moto's server), give the same Trial API answers compacted and not; smdebug 1.0.34 still reads
a compacted trial unchanged; the hook compacts at close unless told not to."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import GOLDEN_DIR
from refvenv import ref_python, run_ref
from small_training import train
from test_manifest import snapshot, write_steps
from test_s3_trial import upload_dir
from trial_queries import answer, canonical

from smdebug_lite.format import manifest
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_at_close, compact_trial

GOLDEN = sorted(p.name for p in GOLDEN_DIR.iterdir() if (p / "index").is_dir())



def golden_copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(GOLDEN_DIR / name, dst)
    return dst


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_smdebug_written_trial_answers_the_same_compacted(tmp_path, name):
    path = golden_copy(name, tmp_path)
    result = compact_trial(str(path))
    assert result.chunks_written == 1 and result.values_inlined > 0
    plain, compacted = create_trial(str(GOLDEN_DIR / name)), create_trial(str(path))
    assert compacted.index_files_read == 0
    queries = json.loads((GOLDEN_DIR / "expected" / f"{name}.json").read_text())["queries"]
    for q in queries:
        assert canonical(answer(compacted, q)) == canonical(answer(plain, q)), q["id"]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_compacted_on_s3(s3_endpoint, s3_bucket, name):
    uri = upload_dir(s3_endpoint.client(), GOLDEN_DIR / name, s3_bucket, f"runs/{name}")
    result = compact_trial(uri)
    assert result.requests and result.index_files > 0
    s3 = create_trial(uri)
    assert s3.index_files_read == 0
    local = create_trial(str(GOLDEN_DIR / name))
    queries = json.loads((GOLDEN_DIR / "expected" / f"{name}.json").read_text())["queries"]
    for q in queries:
        assert canonical(answer(s3, q)) == canonical(answer(local, q)), q["id"]


@pytest.mark.slow
def test_generated_trial_on_s3_opens_in_fewer_requests(s3_endpoint, s3_bucket, tmp_path):
    write_steps(tmp_path / "t", range(60), end=True)
    expected = snapshot(create_trial(str(tmp_path / "t")))
    uri = upload_dir(s3_endpoint.client(), tmp_path / "t", s3_bucket, "runs/gen")
    plain = create_trial(uri)
    plain_requests = plain.storage.requests
    result = compact_trial(uri, chunk_steps=20)
    assert result.chunks_written == 3 and result.index_files_read == 120
    compacted = create_trial(uri)
    assert compacted.index_files_read == 0
    assert compacted.storage.requests * 10 < plain_requests
    assert snapshot(compacted) == expected == snapshot(plain)
    # Appended after compaction, on S3: later steps come from their own index files.
    write_steps(tmp_path / "more", range(60, 70), end=True)
    upload_dir(s3_endpoint.client(), tmp_path / "more", s3_bucket, "runs/gen")
    t = create_trial(uri)
    assert t.steps() == list(range(70)) and t.index_files_read == 20


READER = r"""
import hashlib, json, logging, sys
logging.disable(logging.CRITICAL)
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
out = {"names": sorted(t.tensor_names()), "steps": t.steps(),
       "modes": sorted(m.name for m in t.modes()), "workers": sorted(t.workers())}
for n in out["names"]:
    tensor = t.tensor(n)
    for s in tensor.steps():
        for w in tensor.workers(s):
            v = tensor.value(s, worker=w)
            out[f"{n}/{s}/{w}"] = hashlib.sha256(v.tobytes()).hexdigest()
print(json.dumps(out))
"""


def smdebug_reads(path: str, env: dict | None = None) -> dict:
    import os

    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        proc = run_ref(READER, path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(ref_python()[0] is None, reason=ref_python()[1])
@pytest.mark.slow
def test_smdebug_reads_a_compacted_trial_unchanged(tmp_path, s3_endpoint, s3_bucket):
    write_steps(tmp_path / "plain", range(8), end=True)
    shutil.copytree(tmp_path / "plain", tmp_path / "compacted")
    compact_trial(str(tmp_path / "compacted"))
    assert (tmp_path / "compacted" / manifest.HEAD_KEY).exists()
    expected = smdebug_reads(str(tmp_path / "plain"))
    assert expected["steps"] == list(range(8)) and len(expected) > 40
    assert smdebug_reads(str(tmp_path / "compacted")) == expected
    uri = upload_dir(s3_endpoint.client(), tmp_path / "compacted", s3_bucket, "runs/c")
    assert smdebug_reads(uri, s3_endpoint.env) == expected


def test_compact_at_close_honours_the_switches(tmp_path, monkeypatch):
    write_steps(tmp_path, range(5), end=True)
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
    monkeypatch.setenv("SMDEBUG_COMPACT", "0")
    assert compact_at_close(str(tmp_path)) is None
    monkeypatch.delenv("SMDEBUG_COMPACT")
    assert compact_at_close(str(tmp_path), chief=False) is None
    assert not (tmp_path / manifest.HEAD_KEY).exists()
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "11")
    result = compact_at_close(str(tmp_path))
    assert result is not None and result.chunks_written == 0 and "fewer than 11" in result.note
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "10")
    assert compact_at_close(str(tmp_path)).index_files == 10
    # A failure is logged, never raised.
    assert compact_at_close("s3://") is None


def test_compact_at_close_leaves_a_current_manifest_unread_but_checks_one_it_extends(tmp_path):
    """After the writer's last extension nothing is left for close, which then reads no chunk;
    a manifest it does extend is read and checked first, and replaced when damaged."""
    write_steps(tmp_path, range(30), workers=1, end=True)
    first = compact_trial(str(tmp_path), chunk_steps=10)
    again = compact_at_close(str(tmp_path))
    assert again.note == "up to date" and again.chunks_checked == 0 and again.index_files == 30
    chunk = tmp_path / first.manifest.chunks[0].key
    chunk.write_bytes(b"damaged" + chunk.read_bytes()[7:])
    assert compact_at_close(str(tmp_path)).chunks_checked == 0  # (readers check it themselves)
    write_steps(tmp_path, range(30, 35), workers=1, end=True)
    extended = compact_at_close(str(tmp_path))
    assert extended.note.startswith("replaced an invalid manifest")
    assert extended.index_files == 35 and extended.index_files_read == 35
    _answers_as_without_manifest(tmp_path, tmp_path, list(range(35)), compacted=True)


def _answers_as_without_manifest(tmp_path: Path, out: Path, steps: list[int],
                                 compacted: bool) -> None:
    t = create_trial(str(out))
    assert t.steps() == steps
    assert t.index_files_read == (0 if compacted else len(steps))
    shutil.copytree(out, tmp_path / "plain", ignore=shutil.ignore_patterns(manifest.MANIFEST_DIR))
    plain = create_trial(str(tmp_path / "plain"))
    assert plain.index_files_read == len(steps) and snapshot(t) == snapshot(plain)


@pytest.mark.parametrize("switch", ["on", "off"])
def test_pytorch_hook_compacts_at_close(tmp_path, monkeypatch, switch):
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
    monkeypatch.setenv("SMDEBUG_COMPACT", "1" if switch == "on" else "0")
    out = tmp_path / "run"
    train(str(out), 12, save_interval=2)
    assert (out / manifest.HEAD_KEY).exists() == (switch == "on")
    _answers_as_without_manifest(tmp_path, out, list(range(0, 12, 2)), switch == "on")


@pytest.mark.parametrize("saved_steps", [99, 100])
def test_pytorch_hook_compacts_a_hundred_steps_by_default(tmp_path, monkeypatch, saved_steps):
    """Without any setting, a run of 100 saved steps is compacted at close and one of 99 is
    left with its per-step files only; both answer the same as without a manifest."""
    monkeypatch.delenv("SMDEBUG_COMPACT_MIN_FILES", raising=False)
    monkeypatch.delenv("SMDEBUG_COMPACT", raising=False)
    out = tmp_path / "run"
    train(str(out), saved_steps, save_interval=1)
    compacted = saved_steps >= 100
    assert (out / manifest.HEAD_KEY).exists() == compacted
    _answers_as_without_manifest(tmp_path, out, list(range(saved_steps)), compacted)
