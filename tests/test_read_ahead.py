"""A tensor read step after step is fetched ahead in batches (`trials/read_ahead.py`).

Loops of `value(s)` and `reduction_value(s, ...)`, and a rule invoked step by step, must answer
exactly what single reads and `values()` answer, raise the same exceptions for steps, modes and
workers that are not there, keep answering while the trial is still written, and read far fewer
times from storage than there are steps (counted at the trial's Storage, not timed).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from test_s3_trial import upload_dir
from trial_builders import open_writer, write_job, write_steps

from smdebug_lite.exceptions import SMDebugError
from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules import Rule, invoke_rule
from smdebug_lite.trials import create_trial

MODES = [ModeKeys.GLOBAL, ModeKeys.TRAIN, ModeKeys.EVAL]
RED = [("mean", False), ("max", False), ("l2", False), ("mean", True), ("min", True)]


class Counted:
    """Counts the calls a trial makes to its Storage's read methods (each a request: one
    read, or one batch of reads the storage runs concurrently; the reads a batch makes
    itself, on its threads, are part of it)."""

    def __init__(self, trial) -> None:
        self.calls = 0
        self.active = 0
        storage = trial._values.storage  # the trial's own Storage, wrapped in place
        for method in ("read", "read_many", "read_ranges"):
            real = getattr(storage, method)

            def counted(*args, _real=real, **kwargs):
                if not self.active:
                    self.calls += 1
                self.active += 1
                try:
                    return _real(*args, **kwargs)
                finally:
                    self.active -= 1

            setattr(storage, method, counted)


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def outcome(fn: Callable[[], object]) -> object:
    try:
        return np.asarray(fn())
    except SMDebugError as e:
        return (type(e).__name__, str(e))


def same_outcome(a, b) -> bool:
    return a == b if isinstance(a, tuple) or isinstance(b, tuple) else same(a, b)


def loop_answers(trial, steps_of: Callable, read: Callable) -> dict:
    """{(tensor, mode, step): outcome} reading each tensor's steps in order, one at a time."""
    out = {}
    for name in trial.tensor_names():
        t = trial.tensor(name)
        for mode in MODES:
            for s in steps_of(t, mode):
                out[(name, mode, s)] = outcome(lambda t=t, s=s, mode=mode: read(t, s, mode))
    return out


def every_step_and_beyond(t, mode) -> list[int]:
    steps = t.steps(mode=mode)
    return steps + [steps[-1] + 1, steps[-1] + 1000] if steps else [0]


@pytest.fixture(scope="module")
def hook_trial(tmp_path_factory) -> Path:
    """A trial the PyTorch hook wrote: TRAIN then EVAL steps, every step saved."""
    pytest.importorskip("torch")
    from _pytorch_support import write_hook_trial

    return write_hook_trial(tmp_path_factory.mktemp("hook") / "run", 30, 6)


@pytest.mark.parametrize("kind", ["pt_basic", "pt_reductions", "hook"])
def test_value_and_reduction_loops_answer_as_single_reads(kind, request, monkeypatch):
    path = str(GOLDEN_DIR / kind) if kind != "hook" else str(request.getfixturevalue("hook_trial"))

    def trials():
        """A trial that reads ahead and one that does not, nothing read yet."""
        monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", "0")
        single = create_trial(path)
        monkeypatch.delenv("SMDEBUG_READER_AHEAD_STEPS")
        ahead = create_trial(path)
        return ahead, Counted(ahead), single, Counted(single)

    ahead, counted, single, alone = trials()

    def value(t, s, mode):
        return t.value(s, mode=mode)

    got = loop_answers(ahead, every_step_and_beyond, value)
    want = loop_answers(single, every_step_and_beyond, value)
    assert set(got) == set(want)
    assert all(same_outcome(got[k], want[k]) for k in want), [k for k in want
                                                              if not same_outcome(got[k], want[k])]
    # ... and as values() over each mode.
    for name in single.tensor_names():
        for mode in MODES:
            try:
                bulk = single.tensor(name).values(mode=mode)
            except SMDebugError:
                continue  # only reductions saved: compared above, one by one
            for s, v in bulk.items():
                assert same(got[(name, mode, s)], v), (name, mode, s)
    if kind != "pt_reductions":  # (its raw values: the loss only)
        assert counted.calls * 4 < alone.calls, (counted.calls, alone.calls)

    ahead, counted, single, alone = trials()
    for red, is_abs in RED:
        def reduction(t, s, mode, red=red, is_abs=is_abs):
            return t.reduction_value(s, red, mode=mode, abs=is_abs)

        got = loop_answers(ahead, every_step_and_beyond, reduction)
        want = loop_answers(single, every_step_and_beyond, reduction)
        assert all(same_outcome(got[k], want[k]) for k in want), (red, is_abs)
    if kind == "pt_reductions":  # saved reductions, read from their records (7 steps)
        assert counted.calls * 2 < alone.calls, (counted.calls, alone.calls)


def test_loops_read_far_fewer_times_than_steps(tmp_path, monkeypatch):
    def tensors(s):
        return {"w": np.arange(64, dtype=np.float32).reshape(4, 16) + s,
                "b": np.full(8, s, dtype=np.float64)}

    root = tmp_path / "t"
    write_job(str(root), range(500), tensors)
    trial = create_trial(str(root))
    counted = Counted(trial)
    w = trial.tensor("w")
    values = [w.value(s) for s in w.steps()]
    assert counted.calls <= 500 // 128 + 2, counted.calls
    bulk = create_trial(str(root)).tensor("w").values()
    assert all(same(v, bulk[s]) for s, v in zip(w.steps(), values, strict=True))
    counted.calls = 0
    means = [trial.tensor("b").reduction_value(s, "mean") for s in range(500)]
    assert counted.calls <= 500 // 128 + 2, counted.calls
    assert means == [np.float64(s) for s in range(500)]

    # The window is bounded in bytes too, and can be switched off.
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_MB", "0.01")  # about 30 records of "w"
    trial = create_trial(str(root))
    counted = Counted(trial)
    for s in range(500):
        trial.tensor("w").value(s)
    assert 500 // 40 <= counted.calls <= 500 // 25 + 2, counted.calls
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", "0")
    trial = create_trial(str(root))
    counted = Counted(trial)
    for s in range(500):
        trial.tensor("w").value(s)
    assert counted.calls == 500


def test_random_access_reads_as_before(tmp_path):
    root = tmp_path / "t"
    write_job(str(root), range(200), lambda s: {"w": np.full((4, 4), s, dtype=np.float32)})
    trial = create_trial(str(root))
    counted = Counted(trial)
    order = list(range(0, 200, 7)) + list(range(199, 0, -13))
    for s in order:
        assert trial.tensor("w").value(s)[0, 0] == s
    assert counted.calls == len(set(order))  # one read each, nothing fetched ahead


def test_a_rule_invoked_step_by_step_reads_in_batches(tmp_path, monkeypatch):
    class Norms(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)
            self.seen: dict[int, tuple] = {}

        def invoke_at_step(self, step):
            w = self.base_trial.tensor("w").value(step)
            b = self.base_trial.tensor("b").reduction_value(step, "l2")
            self.seen[step] = (float(np.abs(w).sum()), float(b))
            return False

    def tensors(s):
        return {"w": np.arange(32, dtype=np.float32) - s, "b": np.full(8, s, dtype=np.float64),
                "loss": np.array(1.0 / (s + 1), dtype=np.float32)}

    root = tmp_path / "t"
    write_job(str(root), range(300), tensors)
    results = []
    for steps_ahead in ("128", "0"):
        monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", steps_ahead)
        trial = create_trial(str(root))
        counted = Counted(trial)
        rule = Norms(trial)
        assert invoke_rule(rule).steps_evaluated == 300
        results.append((rule.seen, counted.calls))
    (ahead, ahead_calls), (single, single_calls) = results
    assert ahead == single
    assert single_calls == 300 and ahead_calls <= 2 * (300 // 128 + 2), ahead_calls


def test_two_workers_loops(tmp_path):
    out = tmp_path / "two"
    writers = [open_writer(str(out), f"worker_{i}", num_workers=2) for i in range(2)]
    for i, w in enumerate(writers):
        write_steps(w, range(40), lambda s, i=i: {"w": np.full(5, 100 * i + s, np.float32)})
        w.close()
    trial = create_trial(str(out))
    counted = Counted(trial)
    t = trial.tensor("w")
    for worker in (None, "worker_0", "worker_1"):
        bulk = create_trial(str(out)).tensor("w").values(worker=worker)
        for s in t.steps():
            assert same(t.value(s, worker=worker), bulk[s]), (worker, s)
    assert counted.calls < 40, counted.calls
    with pytest.raises(SMDebugError) as e:
        t.value(3, worker="worker_7")
    assert type(e.value).__name__ == "InvalidWorker"


def test_loop_over_a_trial_still_written(tmp_path):
    """Steps written after the loop started are read when they come; a step not written yet
    raises as it does without reading ahead, and is read once it is there."""
    def tensors(s):
        return {"w": np.full((3, 3), s, dtype=np.float32)}

    root = tmp_path / "live"
    writer = open_writer(str(root))
    write_steps(writer, range(20), tensors)
    trial = create_trial(str(root), timeout=5)
    t = trial.tensor("w")
    for s in range(20):
        assert t.value(s)[0, 0] == s
    with pytest.raises(SMDebugError) as e:
        t.value(20)
    not_yet = type(e.value).__name__
    assert not_yet == "StepNotYetAvailable"
    write_steps(writer, range(20, 200), tensors)
    for s in range(20, 200):
        assert t.value(s)[0, 0] == s
    write_steps(writer, range(200, 230), tensors)
    writer.close()
    assert [t.value(s)[0, 0] for s in range(195, 230)] == list(range(195, 230))
    with pytest.raises(SMDebugError) as e:
        t.value(230)
    assert type(e.value).__name__ in ("NoMoreData", "StepUnavailable")


def test_damaged_step_ahead_is_met_only_where_it_is_read(tmp_path):
    root = tmp_path / "t"
    write_job(str(root), range(50), lambda s: {"w": np.full(6, s, dtype=np.float32)})
    event = root / "events" / f"{30:012d}" / f"{30:012d}_worker_0.tfevents"
    data = bytearray(event.read_bytes())
    data[-10] ^= 0xFF
    event.write_bytes(bytes(data))
    trial = create_trial(str(root))
    t = trial.tensor("w")
    for s in range(50):
        if s == 30:
            with pytest.raises(SMDebugError, match="000000000030_worker_0.tfevents"):
                t.value(s)
        else:
            assert t.value(s)[0] == s


def test_loops_on_s3(tmp_path, s3_endpoint, s3_bucket):
    uri = upload_dir(s3_endpoint.client(), GOLDEN_DIR / "pt_basic", s3_bucket, "pt_basic")
    local = create_trial(str(GOLDEN_DIR / "pt_basic"))
    trial = create_trial(uri)
    counted = Counted(trial)
    name = "Sequential_0.weight"
    t = trial.tensor(name)
    for s in t.steps():
        assert same(t.value(s), local.tensor(name).value(s))
    assert counted.calls <= 4, counted.calls


def test_compacted_trial_loops(tmp_path):
    from smdebug_lite.writer.compaction import compact_trial

    root = tmp_path / "t"
    shutil.copytree(GOLDEN_DIR / "pt_reductions", root)
    compact_trial(str(root))
    trial, plain = create_trial(str(root)), create_trial(str(GOLDEN_DIR / "pt_reductions"))
    for name in plain.tensor_names():
        t, p = trial.tensor(name), plain.tensor(name)
        for s in p.steps():
            for red, is_abs in RED:
                got = outcome(lambda t=t, s=s, r=red, a=is_abs: t.reduction_value(s, r, abs=a))
                want = outcome(lambda p=p, s=s, r=red, a=is_abs: p.reduction_value(s, r, abs=a))
                assert same_outcome(got, want), (name, s, red, is_abs)


def test_bad_settings_warn_and_keep_their_defaults(monkeypatch):
    from conftest import kept_log_records

    from smdebug_lite.trials.read_ahead import ahead_settings

    records = kept_log_records("smdebug_lite.config.env_settings")
    seen = next(records)
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", "-3")
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_MB", "lots")
    assert ahead_settings() == (128, 64 << 20)
    assert [r.getMessage() for r in seen] == [
        "environment variable SMDEBUG_READER_AHEAD_STEPS='-3' must be a non-negative integer; "
        "using the default 128",
        "environment variable SMDEBUG_READER_AHEAD_MB='lots' must be a non-negative number; "
        "using the default 64"]
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", "16")
    monkeypatch.setenv("SMDEBUG_READER_AHEAD_MB", "0.5")
    assert ahead_settings() == (16, 1 << 19)
    records.close()
