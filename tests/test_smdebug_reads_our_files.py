"""Real smdebug 1.0.34 (reference venv) reads what our writer produces: same names, steps,
modes and values, for every dtype a framework produces."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from refvenv import ref_python, run_ref

from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

ARRAYS = {
    "f16": np.linspace(-1, 1, 5).astype(np.float16),
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
    "f64": np.array([np.pi]),
    "bf16": np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "i16": np.array([-300, 300], dtype=np.int16),
    "i32": np.array([-(2**31)], dtype=np.int32),
    "i64": np.array([2**62], dtype=np.int64),
    "u8": np.array([255], dtype=np.uint8),
    "u16": np.array([65535], dtype=np.uint16),
    "u32": np.array([2**32 - 1], dtype=np.uint32),
    "u64": np.array([2**40], dtype=np.uint64),
    "bool": np.array([True, False]),
    "scalar0d": np.array(3.25, dtype=np.float32),
    "strings": np.array(["hello", "wörld"]),
    "smdebug/reductions/mean/f32": np.array(2.5, dtype=np.float32),
}

READER = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
out = {"names": t.tensor_names(), "steps": t.steps(), "modes": sorted(m.name for m in t.modes()),
       "mode_steps": {str(s): [t.mode(s).name, t.mode_step(s)] for s in t.steps()}, "values": {}}
for n in t.tensor_names():
    for s in t.tensor(n).steps():
        v = t.tensor(n).value(s)
        out["values"][f"{n}@{s}"] = [v.tolist(), str(v.dtype), list(v.shape)]
out["reduction"] = float(t.tensor("f32").reduction_value(1, "mean"))
print(json.dumps(out))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_reads_everything_we_write(tmp_path):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    w = TrialWriter(str(tmp_path))
    for step, (mode, mode_step) in enumerate([(ModeKeys.TRAIN, 0), (ModeKeys.TRAIN, 1), (ModeKeys.EVAL, 0)]):
        sw = w.new_step(step, mode, mode_step)
        for name, arr in ARRAYS.items():
            sw.add_tensor(name, arr)
        w.submit(sw)
    w.write_collections(json.dumps({"collections": {}, "_meta": {"num_workers": 1}}))
    w.close()
    proc = run_ref(READER, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["names"] == sorted(n for n in ARRAYS if not n.startswith("smdebug/"))
    assert got["steps"] == [0, 1, 2]
    assert got["modes"] == ["EVAL", "TRAIN"]
    assert got["mode_steps"] == {"0": ["TRAIN", 0], "1": ["TRAIN", 1], "2": ["EVAL", 0]}
    for name, arr in ARRAYS.items():
        if name.startswith("smdebug/"):
            continue
        for step in range(3):
            values, dtype, shape = got["values"][f"{name}@{step}"]
            assert shape == list(arr.shape), name
            expected = arr.astype(np.float32) if arr.dtype == ml_dtypes.bfloat16 else arr
            assert np.array_equal(np.array(values, dtype=expected.dtype), expected), name
            if name in ("f16", "f32", "f64", "i32", "i64", "u8", "bool", "scalar0d"):
                assert dtype == str(arr.dtype), name  # stored as is
    assert got["reduction"] == 2.5
