"""The writer process: same files as the thread writer, shared memory reuse, back-pressure, and
what happens when either process fails (errors reported, nothing saved is lost)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from waiting import wait_until

from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial
from smdebug_lite.writer import ProcessTrialWriter, open_trial_writer
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter
from smdebug_lite.writer.process import handle
from smdebug_lite.writer.process import lifecycle as wp
from smdebug_lite.writer.process.shared_arena import Arena, shared_memory_supported

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not shared_memory_supported(), reason="needs memfd (Linux)")


def _tensors(step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(step)
    return {
        "big": rng.random((300, 40)).astype(np.float32),  # shared memory
        "small": np.arange(5, dtype=np.int64) + step,  # inside the message
        "scalar": np.float64(step / 3),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "bf16": rng.random(2000).astype(ml_dtypes.bfloat16),
        "int8": np.arange(-3, 3, dtype=np.int8),
        "strided": rng.random((40, 60))[:, ::2],  # not contiguous: copied into shared memory
        "strings": np.array(["a", "bc"]),
    }


def _write(writer, steps=range(4)) -> None:
    for step in steps:
        sw = writer.new_step(step, ModeKeys.TRAIN, step)
        for i, (name, value) in enumerate(_tensors(step).items()):
            sw.add_tensor(name, value, wall_time=1000.0 + step + i / 100)
        sw.add_shape("only_shape", (3, 4))
        writer.submit(sw)
    writer.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    writer.close()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_writes_the_same_bytes_as_the_thread_writer(tmp_path):
    proc = wp.writer_process()
    assert proc is not None
    _write(ProcessTrialWriter(proc, str(tmp_path / "p"), "worker_0"))
    _write(TrialWriter(str(tmp_path / "t"), "worker_0"))
    ours, theirs = _files(tmp_path / "p"), _files(tmp_path / "t")
    assert ours.keys() == theirs.keys()
    assert ours == theirs
    trial = create_trial(str(tmp_path / "p"))
    for step in range(4):
        for name, value in _tensors(step).items():
            got = trial.tensor(name).value(step)
            want = value.astype(np.float32) if value.dtype == ml_dtypes.bfloat16 else np.asarray(value)
            assert np.array_equal(got, want), (name, step)


def test_open_trial_writer_uses_the_process_unless_told_otherwise(tmp_path, monkeypatch):
    w = open_trial_writer(str(tmp_path / "a"))
    assert isinstance(w, ProcessTrialWriter)
    w.close()
    monkeypatch.setenv("SMDEBUG_WRITER", "thread")
    w = open_trial_writer(str(tmp_path / "b"))
    assert isinstance(w, TrialWriter)
    w.close()


def test_a_writer_process_that_cannot_start_leaves_writing_to_a_thread(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(wp, "_instance", None)
    monkeypatch.setattr(wp, "_unavailable", None)
    monkeypatch.setattr(handle, "child_argv",
                        lambda *_: [sys.executable, "-c", "import sys; sys.exit(3)"])
    w = open_trial_writer(str(tmp_path))
    assert isinstance(w, TrialWriter)
    assert "could not start its writer process" in caplog.text and "exit code 3" in caplog.text
    _write(w, steps=[0])
    assert create_trial(str(tmp_path)).steps() == [0]
    assert wp.writer_process() is None  # not retried for every hook


def test_an_unknown_writer_choice_is_named_in_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SMDEBUG_WRITER", "procss")
    w = open_trial_writer(str(tmp_path))
    assert isinstance(w, ProcessTrialWriter)
    assert "SMDEBUG_WRITER='procss' is not one of process/thread" in caplog.text
    w.close()


def test_a_bad_start_timeout_is_named_and_the_default_used(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(wp, "_instance", None)
    monkeypatch.setattr(wp, "_unavailable", None)
    monkeypatch.setenv("SMDEBUG_WRITER_START_TIMEOUT_S", "soon")
    w = open_trial_writer(str(tmp_path))
    assert isinstance(w, ProcessTrialWriter)  # started within the default 60 s
    assert ("SMDEBUG_WRITER_START_TIMEOUT_S='soon' must be a positive number; using the default 60"
            in caplog.text)
    _write(w, steps=[0])
    assert create_trial(str(tmp_path)).steps() == [0]


def _arena(capacity=1 << 20):
    announced, dropped = [], []
    return Arena(capacity, announced.append, dropped.append), announced, dropped


def test_arena_reuses_released_space_and_starts_over_when_all_is_free():
    arena, announced, _ = _arena()
    f32 = np.dtype(np.float32)
    a = arena.array(f32, (1000,), wait=lambda: False)
    b = arena.array(f32, (1000,), wait=lambda: False)
    where_a, where_b = arena.locate(a), arena.locate(b)
    assert where_a != where_b and len(announced) == 1
    del a
    c = arena.array(f32, (1000,), wait=lambda: False)
    assert arena.locate(c) == where_a  # the released region, not fresh pages
    view = c[10:20]
    del c
    d = arena.array(f32, (1000,), wait=lambda: False)
    assert arena.locate(d) not in (where_a, where_b)  # a view still holds the old region
    del view, b, d
    e = arena.array(np.dtype(np.uint8), (700_000,), wait=lambda: False)
    assert arena.locate(e) == (0, 0)  # everything was free: the segment starts over


def _resident_bytes(address: int) -> int:
    """Resident bytes of this process's mapping that contains `address` (/proc/self/smaps)."""
    inside = False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "Rss:":
            return int(line.split()[1]) * 1024
    raise AssertionError("mapping not found")


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_REMOVE"), reason="Linux only")
def test_arena_gives_back_the_pages_of_one_unusually_large_step():
    arena, _, _ = _arena(capacity=64 << 20)
    u8 = np.dtype(np.uint8)
    big = arena.array(u8, (40 << 20,), wait=lambda: False)
    big.fill(1)  # one large step: 40 MiB of pages written
    base = arena.segments[0].base
    del big
    for cycle in range(9):  # then steps of 1 MiB, each written and released
        small = arena.array(u8, (1 << 20,), wait=lambda: False)
        small.fill(2)
        assert arena.locate(small) == (0, 0)
        if cycle < 7:  # the large step is still among the recent cycles: its pages are kept
            assert _resident_bytes(base) >= 40 << 20
        del small
    assert _resident_bytes(base) <= 2 << 20  # given back; the 1 MiB in use stays
    again = arena.array(u8, (40 << 20,), wait=lambda: False)  # a large step again: still works
    again.fill(3)
    assert arena.locate(again) == (0, 0) and int(again[-1]) == 3


def test_arena_waits_while_something_is_pending_then_gives_a_segment_of_its_own():
    arena, announced, dropped = _arena(capacity=4096)
    u8 = np.dtype(np.uint8)
    held = arena.array(u8, (4096,), wait=lambda: False)
    waits = []

    def wait_then_release():
        waits.append(1)
        if len(waits) == 1:
            return True  # "a step is pending": the arena must try again
        return False

    other = arena.array(u8, (1000,), wait=wait_then_release)
    assert len(waits) == 2 and arena.locate(other)[0] == 1  # its own segment
    big = arena.array(u8, (10_000,), wait=lambda: pytest.fail("never waits for what cannot fit"))
    assert arena.locate(big)[0] == 2
    del other, big, held
    again = arena.array(u8, (64,), wait=lambda: False)  # releases are handled on a request
    assert sorted(dropped) == [1, 2] and [s.id for s in announced] == [0, 1, 2]
    assert arena.locate(again) == (0, 0)


def test_back_pressure_with_a_small_shared_memory(tmp_path):
    proc = handle.WriterProcess(capacity=1 << 20)  # 1 MiB; each step is 0.8 MiB
    try:
        w = ProcessTrialWriter(proc, str(tmp_path), "worker_0")
        values = {}
        for step in range(6):
            sw = w.new_step(step, ModeKeys.TRAIN, step)
            values[step] = np.full(200_000, step, dtype=np.float32)
            sw.add_tensor("x", values[step])
            w.submit(sw)
        w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
        w.close()
        assert proc.waits.total_s > 0  # each step waited for the one before to be written
        assert [s.id for s in proc.arena.segments] == [0]  # and needed no extra segment
    finally:
        proc.channel.close()
    trial = create_trial(str(tmp_path))
    for step, value in values.items():
        assert np.array_equal(trial.tensor("x").value(step), value)


def test_write_errors_come_back_to_the_training_process(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    w = open_trial_writer(str(blocker / "out"))
    sw = w.new_step(0, ModeKeys.TRAIN, 0)
    sw.add_tensor("x", np.zeros(3))
    w.submit(sw)
    with pytest.raises(RuntimeError, match=r"writing to .*file/out failed: NotADirectoryError"):
        w.flush()
    with pytest.raises(RuntimeError, match="NotADirectoryError"):
        w.close()


def test_a_killed_writer_process_is_replaced_once_then_a_thread_writes(tmp_path, monkeypatch,
                                                                        caplog):
    """Each death is one warning; the steps the dead process had not acknowledged are handed
    over again, so every step is written (tests/faults/ kill it under real training)."""
    for name in ("_restarts", "_unavailable", "_instance"):  # (put back afterwards)
        monkeypatch.setattr(wp, name, getattr(wp, name))
    proc = wp.writer_process()
    w = ProcessTrialWriter(proc, str(tmp_path / "a"), "worker_0")
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    values = {}

    def submit(step):
        sw = w.new_step(step, ModeKeys.TRAIN, step)
        values[step] = np.full(3000, step, dtype=np.float32)  # (in shared memory)
        sw.add_tensor("x", values[step])
        w.submit(sw)

    submit(0)
    w.flush()
    for step in range(1, 30):
        if step in (10, 20):  # the first death: a new process; the second: a thread
            os.kill(w.pid, signal.SIGKILL)
            w.proc.popen.wait()
        submit(step)
    assert w.pid is None and not caplog.text.count("ERROR")
    w.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert all("was killed by SIGKILL" in m and "no step is lost" in m for m in warnings)
    assert "a new writer process" in warnings[0] and "a thread of the training" in warnings[1]
    trial = create_trial(str(tmp_path / "a"))
    assert trial.steps() == list(range(30)) and trial.loaded_all_steps
    for step, value in values.items():
        assert np.array_equal(trial.tensor("x").value(step), value)
    assert wp.writer_process() is None  # restarts used up: later hooks write from a thread


def test_ctrl_c_does_not_stop_the_writer_process(tmp_path):
    proc = wp.writer_process()
    os.kill(proc.popen.pid, signal.SIGINT)
    time.sleep(0.3)
    w = ProcessTrialWriter(proc, str(tmp_path), "worker_0")
    _write(w, steps=[0])
    assert create_trial(str(tmp_path)).steps() == [0]


def test_s3_environment_set_after_the_process_started_is_used(s3_bucket, tmp_path):
    assert wp.writer_process() is not None  # started before (the session fixture set the env)
    uri = f"s3://{s3_bucket}/proc"
    _write(open_trial_writer(uri), steps=[0, 1])
    trial = create_trial(uri)
    assert trial.steps() == [0, 1]
    assert np.array_equal(trial.tensor("big").value(1), _tensors(1)["big"])


def test_a_step_in_the_same_shared_buffers_is_sent_in_short(tmp_path):
    """Arrays already in shared memory are read in place; a step that reuses the last step's
    arrays under the same names goes over as "again" and is written with its new values."""
    proc = wp.writer_process()
    w = ProcessTrialWriter(proc, str(tmp_path), "worker_0")
    a = proc.shared_array(np.dtype(np.float32), (100, 10))
    b = proc.shared_array(np.dtype(np.int64), (3,))
    sent = []
    w._send = lambda msg, poll=True, send=w._send: (sent.append(msg[0]), send(msg, poll))[1]
    for step in range(3):
        a[...] = step
        b[...] = [step, step + 1, step + 2]
        sw = w.new_step(step, ModeKeys.TRAIN, step)
        sw.add_tensor("a", a)
        sw.add_tensor("b", b)
        w.submit(sw)
        w.flush()  # written before the next step overwrites the buffers
    sw = w.new_step(3, ModeKeys.TRAIN, 3)
    sw.add_tensor("b", b)  # other names: sent in full
    w.submit(sw)
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    w.close()
    assert [k for k in sent if k in ("step", "again")] == ["step", "again", "again", "step"]
    assert not proc._in_flight  # acknowledged through the shared board
    trial = create_trial(str(tmp_path))
    for step in range(3):
        assert np.array_equal(trial.tensor("a").value(step), np.full((100, 10), step, np.float32))
        assert trial.tensor("b").value(step).tolist() == [step, step + 1, step + 2]
    assert trial.tensor("b").value(3).tolist() == [2, 3, 4]


def test_a_repeat_of_an_unknown_step_is_an_error_not_a_silent_loss(tmp_path):
    proc = wp.writer_process()
    w = ProcessTrialWriter(proc, str(tmp_path), "worker_0")
    token = proc.new_token()
    proc.send(("again", w.wid, token, 0, "TRAIN", 0, [1.0, 2.0]))  # no full step came before
    with pytest.raises(RuntimeError, match="repeat of a step of 2 tensors, but the last one had 0"):
        w.flush()


def test_the_ack_board_ring_hands_over_entries_in_order_and_says_when_it_is_full():
    from smdebug_lite.writer.process.ack_board import AckBoard

    trainer = AckBoard.create()
    writer = AckBoard.attach(os.dup(trainer.fd), trainer.size)  # (what the writer process maps)
    try:
        n = AckBoard.RING_ENTRIES
        assert n >= 32
        for round_ in range(3):  # wraps around the ring
            for i in range(n):
                assert trainer.post_again(round_ * n + i, 1, 10 + i, i, 1, i, 1000.5 + i, i % 2)
            assert not trainer.post_again(-1, 1, 0, 0, 1, 0, 0.0, 0)  # full until taken
            got = writer.take_again()
            assert [e[0] for e in got] == [round_ * n + i for i in range(n)]
            assert got[3] == (round_ * n + 3, 1, 13, 3, 1, 3, 1003.5, 1)
            assert writer.take_again() == []
        writer.post_active_until(123.25)
        assert trainer.active_until == 123.25
    finally:
        trainer.close_fd()


def _active_writer(tmp_path, monkeypatch) -> tuple[handle.WriterProcess, ProcessTrialWriter]:
    """A writer process that polls (so repeat steps may go on the ring), with one writer open.
    The repeat steps after it go on the ring however long this process is kept from running
    (on a loaded machine the writer process's polling may end first; it then reads the ring
    at its next idle look)."""
    from smdebug_lite.writer.process.ack_board import RING_SUPPORTED
    from smdebug_lite.writer.process.main import POLL_WHILE_ACTIVE_S

    if not RING_SUPPORTED:
        pytest.skip("the ring is used only where stores are seen in program order (x86)")
    proc = wp.writer_process()
    before = time.monotonic()
    w = ProcessTrialWriter(proc, str(tmp_path), "worker_0")
    w.flush()  # (the writer process ran something just now: it polls for the next 2 s)
    wait_until(lambda: proc.board.active_until >= before + POLL_WHILE_ACTIVE_S,
               what="the writer process saying it polls")
    monkeypatch.setattr(handle, "RING_MARGIN_S", -3600.0)
    return proc, w


def _repeat(w: ProcessTrialWriter, step: int, arrays: dict[str, np.ndarray]) -> None:
    sw = w.new_step(step, ModeKeys.TRAIN, step)
    for name, arr in arrays.items():
        sw.add_tensor(name, arr, wall_time=2000.0 + step)
    w.submit(sw)


def test_repeat_steps_on_the_ring_run_in_order_with_socket_messages(tmp_path, monkeypatch):
    """A repeat step posted on the ring before a full step sent on the socket is written with
    the template before that full step (the writer process runs both by sequence number)."""
    proc, w = _active_writer(tmp_path, monkeypatch)
    a = proc.shared_array(np.dtype(np.float32), (50, 4))
    c = proc.shared_array(np.dtype(np.int64), (7,))
    sent = []
    w._send = lambda msg, poll=True, send=w._send: (sent.append(msg[0]), send(msg, poll))[1]
    head = proc.board._slots[proc.board._HEAD]
    a[...] = 0
    _repeat(w, 0, {"a": a})  # in full: the template
    w.flush()
    a[...] = 1
    _repeat(w, 1, {"a": a})  # on the ring
    c[...] = np.arange(7)
    _repeat(w, 2, {"c": c})  # in full, on the socket, right behind it
    _repeat(w, 3, {"c": c})  # on the ring again, with the new template
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    w.close()
    assert [k for k in sent if k in ("step", "again")] == ["step", "step"]
    assert proc.board._slots[proc.board._HEAD] - head == 2
    assert not proc._in_flight
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.tensor_names(step=1) == ["a"] and trial.tensor_names(step=3) == ["c"]
    assert np.array_equal(trial.tensor("a").value(1), np.ones((50, 4), np.float32))
    assert trial.tensor("c").value(3).tolist() == list(range(7))
    assert _wall_times(tmp_path, 1) == {"a": 2001.0}  # the step's own, from the ring entry


def _wall_times(out_dir: Path, step: int) -> dict[str, float]:
    from smdebug_lite.format.index_file import parse_index
    from smdebug_lite.format.records import decode_record
    from smdebug_lite.format.tensor_codec import decode_tensor_event

    (index,) = out_dir.glob(f"index/*/{step:012d}_*.json")
    doc = parse_index(index.read_text(), str(index))
    buf = (out_dir / doc.event_file_name).read_bytes()
    return {e.name: decode_tensor_event(decode_record(buf, e.start_idx)[0]).wall_time
            for e in doc.tensors}


def test_repeat_steps_go_on_the_socket_when_the_writer_process_may_be_blocked(tmp_path, monkeypatch):
    proc, w = _active_writer(tmp_path, monkeypatch)
    monkeypatch.setattr(handle, "RING_MARGIN_S", 1e9)  # as if its polling ended long ago
    a = proc.shared_array(np.dtype(np.float32), (20,))
    sent = []
    w._send = lambda msg, poll=True, send=w._send: (sent.append(msg[0]), send(msg, poll))[1]
    head = proc.board._slots[proc.board._HEAD]
    for step in range(3):
        a[...] = step
        _repeat(w, step, {"a": a})
        w.flush()
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    w.close()
    assert [k for k in sent if k in ("step", "again")] == ["step", "again", "again"]
    assert proc.board._slots[proc.board._HEAD] == head
    trial = create_trial(str(tmp_path))
    assert [float(trial.tensor("a").value(s)[0]) for s in range(3)] == [0.0, 1.0, 2.0]


def test_a_step_marked_as_a_repeat_goes_on_the_ring_until_an_error_waits(tmp_path, monkeypatch):
    """A step carrying `PendingStep.repeat` (a hook's replayed step) is posted on the ring
    with one look at the board; once the writer process has posted an error, the next one
    raises it instead of being posted."""
    import shutil

    proc, w = _active_writer(tmp_path, monkeypatch)
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    a = proc.shared_array(np.dtype(np.float32), (30,))
    a[...] = 0
    sw = w.new_step(0, ModeKeys.TRAIN, 0)
    sw.add_tensor("a", a, wall_time=1.0)
    template = w.submit(sw)  # in full: the template
    assert template is not None
    w.flush()
    head = proc.board._slots[proc.board._HEAD]
    a[...] = 1
    sw = w.new_step(1, ModeKeys.TRAIN, 1)
    sw.repeat = (template, 1, 5.0)
    assert w.submit(sw) is template
    assert sw.token >= 0 and proc.board._slots[proc.board._HEAD] - head == 1
    w.flush()
    assert create_trial(str(tmp_path)).tensor("a").value(1).tolist() == [1.0] * 30
    assert _wall_times(tmp_path, 1) == {"a": 5.0}

    shutil.rmtree(tmp_path / "events")
    (tmp_path / "events").write_text("in the way")  # the next step's event file cannot be made
    errors = proc.board.errors  # (this process's writer process may have failed before)
    sw = w.new_step(2, ModeKeys.TRAIN, 2)
    sw.repeat = (template, 1, 6.0)
    w.submit(sw)
    while proc.board.errors == errors:  # (the writer process posts the error when it gets there)
        time.sleep(0.01)
    sw = w.new_step(3, ModeKeys.TRAIN, 3)
    sw.repeat = (template, 1, 7.0)
    head = proc.board._slots[proc.board._HEAD]
    with pytest.raises(RuntimeError, match="writing to .* failed: .*Error"):
        w.submit(sw)
    assert proc.board._slots[proc.board._HEAD] == head and sw.token < 0  # not handed over
    with pytest.raises(RuntimeError, match="failed"):
        w.close()


def test_steps_alternating_between_two_sets_of_buffers_go_over_in_short(tmp_path, monkeypatch):
    """Saving every step, the pools alternate between two sets of buffers (one being written
    while the next is captured): after one full step of each, both go over in short."""
    proc, w = _active_writer(tmp_path, monkeypatch)
    sets = [proc.shared_array(np.dtype(np.float32), (30,)) for _ in range(2)]
    sent = []
    w._send = lambda msg, poll=True, send=w._send: (sent.append(msg[0]), send(msg, poll))[1]
    head = proc.board._slots[proc.board._HEAD]
    for step in range(6):
        arr = sets[step % 2]
        arr[...] = step
        _repeat(w, step, {"x": arr})
        w.flush()  # (written before its buffer is filled again)
    w.write_collections('{"collections": {}, "_meta": {"num_workers": 1}}')
    w.close()
    assert [k for k in sent if k in ("step", "again")] == ["step", "step"]
    assert proc.board._slots[proc.board._HEAD] - head == 4
    trial = create_trial(str(tmp_path))
    assert [float(trial.tensor("x").value(s)[0]) for s in range(6)] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("repeats", [False, True], ids=["full steps", "repeat steps"])
def test_steps_sent_before_the_training_process_dies_are_written(tmp_path, repeats):
    """Full steps (on the socket) and repeat steps (on the ring, where there is one) that a
    training process handed over right before it crashed are all written."""
    script = textwrap.dedent(f"""
        import os, sys
        import numpy as np
        sys.path.insert(0, {str(REPO)!r})
        from smdebug_lite.modes import ModeKeys
        from smdebug_lite.writer import ProcessTrialWriter
        from smdebug_lite.writer.process import handle
        from smdebug_lite.writer.process.lifecycle import writer_process
        handle.RING_MARGIN_S = -3600.0  # (repeats on the ring however slowly this process runs)
        proc = writer_process()
        print(proc.popen.pid, flush=True)
        w = ProcessTrialWriter(proc, {str(tmp_path)!r}, "worker_0")
        w.write_collections('{{"collections": {{}}, "_meta": {{"num_workers": 1}}}}')
        w.flush()  # (the writer process polls from here on)
        a = proc.shared_array(np.dtype(np.float32), (100_000,))
        a[...] = 7
        head = proc.board._slots[proc.board._HEAD]
        for step in range(20):
            sw = w.new_step(step, ModeKeys.TRAIN, step)
            if {repeats!r}:  # the same shared array, one wall time: a repeat of step 0
                sw.add_tensor("x", a, wall_time=5.0)
            else:
                sw.add_tensor("x", np.full(100_000, step, dtype=np.float32))
            w.submit(sw)
        print(proc.board._slots[proc.board._HEAD] - head, flush=True)
        os._exit(0)  # no close, no flush: a crash right after the last submit
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    child, posted = (int(x) for x in out.stdout.split())
    from smdebug_lite.writer.process.ack_board import RING_SUPPORTED

    assert posted == (19 if repeats and RING_SUPPORTED else 0)
    deadline = time.time() + 60
    while time.time() < deadline and Path(f"/proc/{child}").exists():
        time.sleep(0.05)
    assert not (tmp_path / "training_job_end.ts").exists()  # nobody said training ended
    (tmp_path / "training_job_end.ts").touch()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == list(range(20)), (trial.steps(), out.stderr[-3000:])
    last = np.full(100_000, 7 if repeats else 19, dtype=np.float32)
    assert np.array_equal(trial.tensor("x").value(19), last)
