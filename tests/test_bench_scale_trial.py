"""The scale benchmark's synthetic trial (bench/bench_scale.py) is a valid trial: its templated
files are byte for byte what the format's encoders write, and both smdebug-lite's Trial API and
smdebug 1.0.34 read the expected steps, modes, workers, tensor names and values from it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from refvenv import ref_python, run_ref

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The benchmark quiets the library's logs for its own process; the tests that run after this
# one (and their subprocesses) must keep the default.
_log_level = os.environ.get("SMDEBUG_LOG_LEVEL")
from bench.bench_scale import (  # noqa: E402
    encode_step,
    generate_steps,
    make_trial,
    mode_of,
    scalar_values,
    tensor_names,
)

if _log_level is None:
    os.environ.pop("SMDEBUG_LOG_LEVEL", None)
else:
    os.environ["SMDEBUG_LOG_LEVEL"] = _log_level
from smdebug_lite.modes import ModeKeys  # noqa: E402
from smdebug_lite.trials import create_trial  # noqa: E402
from smdebug_lite.writer.compaction import compact_trial  # noqa: E402

# Past 128 (a two-byte step varint) and 1000 (mode steps of four digits, a second index group).
STEPS, WORKERS, SCALARS = 1130, 2, 3


@pytest.fixture(scope="module")
def trial_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "trial"
    make_trial(root, STEPS, WORKERS, SCALARS, processes=2)
    return root


def test_every_templated_step_matches_the_encoders():
    names = tensor_names(SCALARS)
    values = scalar_values(STEPS, SCALARS)
    workers = [f"worker_{w}" for w in range(WORKERS)]
    seen = 0
    for s, event, docs in generate_steps(range(STEPS), WORKERS, SCALARS, values):
        real_event, _, real_docs = encode_step(names, values[s], s, workers)
        assert event == real_event and docs == real_docs, s
        seen += 1
    assert seen == STEPS


def expected() -> dict:
    values = scalar_values(STEPS, SCALARS)
    return {
        "steps": list(range(STEPS)),
        "eval_steps": [mode_of(s)[1] for s in range(STEPS) if mode_of(s)[0] == ModeKeys.EVAL],
        "workers": [f"worker_{w}" for w in range(WORKERS)],
        "names": tensor_names(SCALARS),
        "last": values[:, SCALARS - 1].tolist(),
    }


def test_smdebug_lite_reads_the_generated_trial(trial_dir):
    want = expected()
    t = create_trial(str(trial_dir))
    assert t.steps() == want["steps"]
    assert t.steps(mode=ModeKeys.EVAL) == want["eval_steps"]
    assert sorted(t.workers()) == want["workers"]
    assert sorted(t.tensor_names()) == want["names"]
    values = scalar_values(STEPS, SCALARS)
    for k, name in enumerate(want["names"]):
        got = t.tensor(name).values()
        assert sorted(got) == want["steps"]
        assert np.array_equal(np.array([got[s] for s in range(STEPS)], dtype=np.float32),
                              values[:, k]), name
    last = t.tensor(want["names"][-1])
    assert float(last.value(1129, worker="worker_1")) == want["last"][1129]
    mode, mode_step = mode_of(1129)
    assert float(last.value(mode_step, mode=mode)) == want["last"][1129]


def test_generated_trial_compacts_and_answers_the_same(trial_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trial_dir, copy)
    result = compact_trial(str(copy))
    assert result.index_files == STEPS * WORKERS and result.chunks_written == 2
    assert result.values_inlined == STEPS * WORKERS * SCALARS
    t = create_trial(str(copy))
    assert t.index_files_read == 0 and t.steps() == expected()["steps"]
    name = tensor_names(SCALARS)[1]
    got = t.tensor(name).values()
    assert np.array_equal(np.array([got[s] for s in range(STEPS)], dtype=np.float32),
                          scalar_values(STEPS, SCALARS)[:, 1])


REF_READ = r"""
import json, sys
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
t = create_trial(sys.argv[1])
names = sorted(t.tensor_names())
last = t.tensor(names[-1])
print(json.dumps({
    "steps": t.steps(), "eval_steps": t.steps(mode=ModeKeys.EVAL),
    "workers": sorted(t.workers()), "names": names,
    "last": [float(last.value(s, worker="worker_1")) for s in t.steps()],
}))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_reads_the_generated_trial(trial_dir):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    proc = run_ref(REF_READ, str(trial_dir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == expected()
