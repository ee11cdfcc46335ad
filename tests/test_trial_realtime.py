"""A trial read while real writer processes are still adding steps."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from smdebug_lite.exceptions import NoMoreData
from smdebug_lite.trials import StepState, create_trial

REPO = Path(__file__).resolve().parents[1]
WRITER = r"""
import os, sys, time
import numpy as np
from smdebug_lite.config import CollectionManager
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

out, worker, num_workers, steps, delay, start_delay, hold = sys.argv[1:8]
num_workers, steps, delay, start_delay = int(num_workers), int(steps), float(delay), float(start_delay)
time.sleep(start_delay)
w = TrialWriter(out, worker)
w.write_collections(CollectionManager(framework="pytorch", num_workers=num_workers).export())
w.flush()
rank = int(worker.split("_")[-1])
for s in range(steps):
    give_up = time.monotonic() + 120
    while hold and s == steps - 1 and not os.path.exists(hold) and time.monotonic() < give_up:
        time.sleep(0.02)  # the last step waits until the test has seen the run in progress
    sw = w.new_step(s, ModeKeys.TRAIN, s)
    sw.add_tensor("w", np.full(3, 100 * rank + s, dtype=np.float32))
    sw.add_tensor("loss", np.array(1.0 / (s + 1), dtype=np.float32))
    w.submit(sw)
    w.flush()
    time.sleep(delay)
w.close()
"""


def start_writer(out: str, worker: str = "worker_0", num_workers: int = 1, steps: int = 8,
                 delay: float = 0.15, start_delay: float = 0.0, hold: Path | None = None,
                 ) -> subprocess.Popen:
    """A writer process; with `hold`, its last step waits until that file exists (so that a
    reader on a loaded machine still sees the run in progress)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), SMDEBUG_LOG_LEVEL="warning")
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, out, worker, str(num_workers), str(steps), str(delay),
         str(start_delay), str(hold or "")], cwd=str(REPO), env=env)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def test_reads_steps_while_a_writer_process_adds_them(tmp_path, procs):
    out = str(tmp_path / "live")
    n = 8
    release = tmp_path / "release"
    procs.append(start_writer(out, steps=n, start_delay=0.3, hold=release))
    trial = create_trial(out, timeout=60)  # waits for the collections file to appear
    observed_counts = []
    saw_running = False
    for s in range(n):
        trial.wait_for_steps([s], timeout=60)
        saw_running |= not trial.loaded_all_steps
        observed_counts.append(len(trial.steps()))
        assert trial.tensor("w").value(s).tolist() == [float(s)] * 3
        assert trial.has_passed_step(s) is StepState.AVAILABLE
        release.touch()  # (seen in progress: the writer may write its last step)
    assert procs[0].wait(timeout=60) == 0
    assert saw_running, "the writer finished before the trial saw a single step"
    assert observed_counts == sorted(observed_counts) and observed_counts[0] < n
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([n], timeout=60)
    assert trial.loaded_all_steps and trial.steps() == list(range(n))
    assert {s: float(v) for s, v in trial.tensor("loss").values().items()} == {
        s: pytest.approx(1 / (s + 1)) for s in range(n)}


def test_two_writer_processes_one_slower(tmp_path, procs):
    out = str(tmp_path / "dist")
    n = 6
    procs.append(start_writer(out, "worker_0", 2, steps=n, delay=0.05))
    release = tmp_path / "release"
    procs.append(start_writer(out, "worker_1", 2, steps=n, delay=0.25, hold=release))
    trial = create_trial(out, timeout=60)
    deadline = time.monotonic() + 60
    seen_incomplete = False
    while not trial.loaded_all_steps and time.monotonic() < deadline:
        complete = trial.steps()
        everything = trial.steps(show_incomplete_steps=True)
        seen_incomplete |= len(everything) > len(complete)
        if seen_incomplete:
            release.touch()
        for s in complete:  # a complete step has both workers' data, whatever the timing
            w = trial.tensor("w")
            assert w.value(s, worker="worker_1").tolist() == [100.0 + s] * 3
            assert w.value(s).tolist() == [float(s)] * 3
        time.sleep(0.05)
    release.touch()
    for p in procs:
        assert p.wait(timeout=60) == 0
    trial.wait_for_steps(range(n), timeout=60)
    assert trial.workers() == ["worker_0", "worker_1"] and trial.steps() == list(range(n))
    assert seen_incomplete, "the slower worker never lagged behind"
    values = trial.tensor("w").values(worker="worker_1")
    assert {s: v.tolist() for s, v in values.items()} == {s: [100.0 + s] * 3 for s in range(n)}
    assert np.all([trial.tensor("w").workers(s) == ["worker_0", "worker_1"] for s in range(n)])
