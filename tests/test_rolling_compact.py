"""Rolling compaction: the chief worker's writer has the manifest extended by whole blocks of
steps while training runs, and by the tail when writing ends, so a live job's trial opens from
its manifest and a killed job's is as compacted as a closed one's; each index file is read once
over the run; only steps every worker has passed are covered; failures and switches leave
training and the close-time compaction alone."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import kept_log_records
from small_training import train
from test_manifest import snapshot, write_steps
from waiting import wait_until

from smdebug_lite.format import manifest as mf
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial, rolling

REPO = Path(__file__).resolve().parents[1]
STEPS = 2050  # two whole blocks of 1,000 steps and a tail

def _chunks(out: Path) -> list[tuple[int, int, int]]:
    head = out / mf.HEAD_KEY
    if not head.exists():
        return []
    return [(c.first_step, c.last_step, c.files) for c in mf.decode_head(head.read_bytes()).chunks]


def _wait_for_chunks(out: Path, want: list[tuple[int, int, int]], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while _chunks(out) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _chunks(out) == want


def _same_as_without_manifest(tmp_path: Path, out: Path, steps: int, uncovered: int) -> None:
    t = create_trial(str(out))
    assert t.steps() == list(range(steps)) and t.index_files_read == uncovered
    plain_dir = tmp_path / "plain"
    shutil.copytree(out, plain_dir, ignore=shutil.ignore_patterns(mf.MANIFEST_DIR))
    plain = create_trial(str(plain_dir))
    assert plain.index_files_read == steps and snapshot(t) == snapshot(plain)


@pytest.mark.slow
def test_a_killed_training_job_leaves_its_trial_compacted(tmp_path):
    """The training process dies without closing its hook: the writer process writes what it
    was handed and extends the manifest over every step, the tail included, before it exits."""
    out = tmp_path / "run"
    script = ("import os, sys\nfrom small_training import train\n"
              "train(sys.argv[1], int(sys.argv[2]), close=False)\nprint('trained', flush=True)\n"
              "os._exit(0)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMDEBUG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")])
    proc = subprocess.run([sys.executable, "-c", script, str(out), str(STEPS)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stderr[-3000:]
    # (The last step was never ended: a hook hands a step over when the next one begins.)
    _wait_for_chunks(out, [(0, 999, 1000), (1000, 1999, 1000), (2000, 2048, 49)])
    assert not (out / "training_job_end.ts").exists()
    _same_as_without_manifest(tmp_path, out, STEPS - 1, uncovered=0)


def test_a_running_job_is_compacted_block_by_block_reading_each_file_once(tmp_path,
                                                                            monkeypatch):
    """Before close, on the thread writer (whose compactor lives in this process): the manifest
    covers the whole blocks, each compaction trusts the one before it, and the writer's end adds
    the tail (leaving the hook's close-time compaction nothing to do)."""
    for name in ("SMDEBUG_COMPACT", "SMDEBUG_COMPACT_ROLLING", "SMDEBUG_COMPACT_MIN_FILES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SMDEBUG_WRITER", "thread")
    out = tmp_path / "run"
    hook = train(str(out), STEPS, close=False)
    try:
        compactor = rolling.compactor_of(hook.out_dir)
        assert compactor is not None
        _wait_for_chunks(out, [(0, 999, 1000), (1000, 1999, 1000)])
        wait_until(lambda: sum(r.chunks_written for r in compactor.results) >= 2,
                   what="the compactor's answers for both blocks")
        results = list(compactor.results)
        assert sum(r.index_files_read for r in results) == 2000
        assert all(r.chunks_checked == 0 for r in results)  # its own head, trusted
        assert compactor.failed is None
    finally:
        hook.close()
        import smdebug_lite.pytorch as smd

        smd.del_hook()
    assert rolling.compactor_of(hook.out_dir) is None
    assert _chunks(out) == [(0, 999, 1000), (1000, 1999, 1000), (2000, 2049, 50)]
    assert sum(r.index_files_read for r in compactor.results) == STEPS
    assert compactor.results[-1].chunks_checked == 0
    _same_as_without_manifest(tmp_path, out, STEPS, uncovered=0)


def test_whole_blocks_every_worker_has_passed_and_a_trusted_head(tmp_path):
    write_steps(tmp_path, range(25), workers=2)
    first = compact_trial(str(tmp_path), chunk_steps=10, whole_chunks=True)
    assert _chunks(tmp_path) == [(0, 9, 20), (10, 19, 20)] and first.chunks_checked == 0
    write_steps(tmp_path, range(25, 37), workers=1)  # worker_0 ahead, worker_1 at step 24
    again = compact_trial(str(tmp_path), chunk_steps=10, whole_chunks=True,
                          trusted=first.manifest)
    assert again.chunks_written == 0 and again.chunks_checked == 0 and again.note == "up to date"
    write_steps(tmp_path, range(25, 31), workers=2)  # worker_1 reaches step 30
    third = compact_trial(str(tmp_path), chunk_steps=10, whole_chunks=True,
                          trusted=again.manifest)
    assert third.chunks_written == 1 and third.chunks_checked == 0
    assert third.index_files_read == 20 and _chunks(tmp_path)[-1] == (20, 29, 20)
    # A head it did not write (or none trusted) has every chunk read and checked.
    write_steps(tmp_path, range(31, 41), workers=2)
    fourth = compact_trial(str(tmp_path), chunk_steps=10, whole_chunks=True,
                           trusted=first.manifest)
    assert fourth.chunks_checked == 3 and _chunks(tmp_path)[-1] == (30, 39, 20)


def _worker_1_through(root: Path, steps: range) -> None:
    """worker_1's files of `steps` (and its collections file) added to a one-worker trial."""
    write_steps(root / "w1", steps, workers=2)
    for rel in (root / "w1").rglob("*worker_1*"):
        dst = root / rel.relative_to(root / "w1")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(rel, dst)
    shutil.rmtree(root / "w1")


def test_a_compaction_short_of_the_chief_waits_and_the_writer_end_finishes_it(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setattr(rolling, "RETRY_AFTER_S", 3600.0)
    write_steps(tmp_path, range(20), workers=1)
    _worker_1_through(tmp_path, range(15))  # worker_1 is at step 14
    c = rolling.RollingCompactor(str(tmp_path), chunk_steps=10, min_files=0)
    c.step_written(19)
    wait_until(lambda: c.results, what="the first compaction's answer")
    time.sleep(0.2)
    assert _chunks(tmp_path) == [(0, 9, 20)]
    _worker_1_through(tmp_path, range(15, 20))
    c.step_written(19)  # within the retry wait: nothing runs
    time.sleep(0.3)
    assert len(c.results) == 1
    c.end()
    assert _chunks(tmp_path) == [(0, 9, 20), (10, 19, 20)] and len(c.results) == 2


def test_a_compaction_short_of_the_chief_is_tried_again_without_more_steps(tmp_path,
                                                                          monkeypatch):
    """The chief has finished (its last steps written) while a worker lags: the compactor
    tries again on its own once that worker has caught up."""
    monkeypatch.setattr(rolling, "RETRY_AFTER_S", 0.3)
    write_steps(tmp_path, range(20), workers=1)
    _worker_1_through(tmp_path, range(5))
    c = rolling.RollingCompactor(str(tmp_path), chunk_steps=10, min_files=0)
    c.step_written(19)
    wait_until(lambda: c.results, what="the first compaction's answer")
    assert _chunks(tmp_path) == []
    _worker_1_through(tmp_path, range(5, 20))
    _wait_for_chunks(tmp_path, [(0, 9, 20), (10, 19, 20)], timeout=60)
    c.end()


def test_a_block_whose_last_step_is_not_saved_is_compacted_once(tmp_path, monkeypatch):
    """Every third step saved: blocks end on steps never written, and a compacted block is not
    compacted again at each later step of the next one."""
    monkeypatch.setattr(rolling, "RETRY_AFTER_S", 0.1)
    write_steps(tmp_path, range(0, 30, 3), workers=1)
    c = rolling.RollingCompactor(str(tmp_path), chunk_steps=10, min_files=0)
    c.step_written(21)  # the first step after block 1
    _wait_for_chunks(tmp_path, [(0, 9, 4), (12, 18, 3)], timeout=60)
    # The head is on disk before the compacting process (at the lowest CPU priority) exits
    # and its answer reaches the compactor: wait for the answer, not a fixed time.
    wait_until(lambda: c.results, what="the first compaction's answer")
    for step in (24, 27):
        c.step_written(step)
    time.sleep(1.5)
    assert len(c.results) == 1 and c.results[0].chunks_written == 2
    c.end()  # and the tail once writing ends
    assert len(c.results) == 2 and _chunks(tmp_path) == [(0, 9, 4), (12, 18, 3), (21, 27, 3)]


def test_a_failure_is_logged_once_and_stops_rolling(tmp_path):
    write_steps(tmp_path, range(12), workers=1)
    (tmp_path / mf.MANIFEST_DIR).write_text("not a directory")
    c = rolling.RollingCompactor(str(tmp_path), chunk_steps=5, min_files=0)
    with contextmanager(kept_log_records)("smdebug_lite.writer.compaction.rolling") as records:
        c.step_written(4)
        wait_until(lambda: c.failed is not None, what="the failed compaction's answer")
        c.step_written(9)
        c.end()
    assert c.failed is not None and len(c.results) == 0
    warned = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and str(tmp_path) in warned[0] and "hook closes" in warned[0]


def test_the_writers_calls_never_raise(tmp_path, monkeypatch):
    """The writer calls `step_written` after each step and `writing_ended` as it finishes: a
    compactor that fails is logged, and the writer goes on."""
    def broken(*_: object) -> None:
        raise RuntimeError("can't start new thread")

    for name in ("SMDEBUG_COMPACT", "SMDEBUG_COMPACT_ROLLING"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(rolling.RollingCompactor, "step_written", broken)
    monkeypatch.setattr(rolling.RollingCompactor, "end", broken)
    with contextmanager(kept_log_records)("smdebug_lite.writer.compaction.rolling") as records:
        rolling.step_written(str(tmp_path), 7)
        rolling.writing_ended(str(tmp_path))
    warned = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert len(warned) == 2 and all(str(tmp_path) in w for w in warned)
    assert "after step 7" in warned[0] and "as its writer finished" in warned[1]
    assert rolling.compactor_of(str(tmp_path)) is None


@pytest.mark.parametrize("switch", ["SMDEBUG_COMPACT", "SMDEBUG_COMPACT_ROLLING"])
def test_the_switches_turn_rolling_off(tmp_path, monkeypatch, switch):
    monkeypatch.delenv("SMDEBUG_COMPACT", raising=False)
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
    monkeypatch.setenv(switch, "0")
    write_steps(tmp_path, range(1000), workers=1, names=("loss",))
    rolling.step_written(str(tmp_path), 999)
    assert rolling.compactor_of(str(tmp_path)) is None
    rolling.writing_ended(str(tmp_path))
    assert not (tmp_path / mf.HEAD_KEY).exists()


@pytest.mark.slow
def test_an_s3_trial_is_compacted_as_its_writer_uploads_it(s3_endpoint, s3_bucket, monkeypatch):
    """The chief's writer stages files and uploads them; the compaction reads the trial from S3
    (a block whose last files are not uploaded yet is compacted at a later step or at the end)."""
    import numpy as np

    from smdebug_lite.config import CollectionManager
    from smdebug_lite.modes import ModeKeys
    from smdebug_lite.writer import ThreadTrialWriter

    for name in ("SMDEBUG_COMPACT", "SMDEBUG_COMPACT_ROLLING", "SMDEBUG_COMPACT_MIN_FILES"):
        monkeypatch.delenv(name, raising=False)
    uri = f"s3://{s3_bucket}/runs/rolling"
    w = ThreadTrialWriter(uri, chief=True)
    w.write_collections(CollectionManager(framework="pytorch").export())
    for step in range(1005):
        sw = w.new_step(step, ModeKeys.TRAIN, step)
        sw.add_tensor("loss", np.array(step / 7, dtype=np.float32))
        w.submit(sw)
    w.flush()
    w.close(mark_training_end=False)  # the end waits for the compaction of every step
    assert rolling.compactor_of(uri) is None
    t = create_trial(uri)
    assert t.steps() == list(range(1005)) and t.index_files_read == 0
    assert t.tensor("loss").values()[1000] == np.float32(1000 / 7)


def test_the_end_compacts_the_tail_unless_the_trial_is_below_the_minimum(tmp_path):
    """Writing ends (a close, or a writer process whose training process died): the steps after
    the last whole block are compacted too, but a trial too short for the close-time compaction
    is left as it is."""
    short, enough = tmp_path / "short", tmp_path / "enough"
    for root, steps in ((short, 20), (enough, 15)):
        write_steps(root, range(steps), workers=1)
    c = rolling.RollingCompactor(str(enough), chunk_steps=10, min_files=12)
    for step in range(15):
        c.step_written(step)
    c.end()
    assert _chunks(enough) == [(0, 9, 10), (10, 14, 5)]
    assert sum(r.index_files_read for r in c.results) == 15
    c = rolling.RollingCompactor(str(short), chunk_steps=100, min_files=21)
    for step in range(20):
        c.step_written(step)
    c.end()
    assert _chunks(short) == [] and [r.note for r in c.results] == [
        "20 index files to cover, fewer than 21"]


def test_a_compaction_past_the_end_wait_is_stopped_not_left_running(tmp_path, monkeypatch):
    """The writer's end gives up waiting: the compacting process is stopped (the hook's
    close-time compaction comes next and must not run beside it), and that is said once."""
    trial, pid_file = tmp_path / "trial", tmp_path / "child.pid"
    write_steps(trial, range(12), workers=1)
    hung = [sys.executable, "-c", f"import os, time; open({str(pid_file)!r}, 'w')"
            ".write(str(os.getpid())); time.sleep(120)"]
    monkeypatch.setattr(rolling, "child_argv", lambda *_: hung)
    c = rolling.RollingCompactor(str(trial), chunk_steps=10, min_files=0)
    with contextmanager(kept_log_records)("smdebug_lite.writer.compaction.rolling") as records:
        c.step_written(10)
        wait_until(lambda: pid_file.exists() and pid_file.read_text(),
                   what="the compacting process's pid file")
        pid = int(pid_file.read_text())
        started = time.monotonic()
        c.end(timeout=0.5)
        assert time.monotonic() - started < 10
    with pytest.raises(ProcessLookupError):  # stopped, and reaped
        os.kill(pid, 0)
    assert c.failed is not None and not c.results
    warned = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "Stopped the compaction" in warned[0] and str(trial) in warned[0]
    assert not (trial / mf.HEAD_KEY).exists()
