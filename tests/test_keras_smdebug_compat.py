"""Real smdebug 1.0.34 (reference venv) reads a Keras run written by our KerasHook. Its TF side
cannot import TensorFlow 2.21, so what is checked is that its trial reads our files: names,
collections, steps, modes and values, the same as our own reader."""

from __future__ import annotations

import json

import numpy as np
import pytest
from lazy_module import lazy, require_module
from refvenv import ref_python, run_ref

from smdebug_lite.hooks import singleton
from smdebug_lite.trials import create_trial

require_module("tensorflow", "keras")
tf = lazy("tensorflow")
keras = lazy("keras")
smd_tf = lazy("smdebug_lite.tensorflow")

READER = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
out = {"steps": t.steps(), "collections": {}, "values": {}, "reductions": {}}
for name, c in t.collections().items():
    out["collections"][name] = sorted(c.tensor_names)
for n in t.tensor_names():
    tensor = t.tensor(n)
    for s in tensor.steps():
        v = tensor.value(s)
        out["values"][f"{n}@{s}"] = [v.tolist(), t.mode(s).name, t.mode_step(s)]
        if n.startswith("gradients/"):
            out["reductions"][f"{n}@{s}"] = float(tensor.reduction_value(s, "l2", abs=False))
print(json.dumps(out))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_reads_a_keras_run(tmp_path):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    singleton.del_hook()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1)], name="m")
    model.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"])
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
    out = tmp_path / "keras"
    hook = smd_tf.KerasHook(str(out), save_config=smd_tf.SaveConfig(save_interval=2),
                     reduction_config=smd_tf.ReductionConfig(norms=["l2"], save_raw_tensor=True),
                     include_collections=["weights", "biases", "gradients", "layers",
                                          "optimizer_variables"])
    model.fit(x, y, batch_size=4, epochs=2, validation_data=(x[:8], y[:8]), verbose=0,
              callbacks=[hook])
    hook.close()

    proc = run_ref(READER, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = create_trial(str(out))
    assert got["steps"] == ours.steps()
    for name in ("weights", "biases", "gradients", "layers", "losses", "metrics",
                 "optimizer_variables"):
        assert got["collections"][name] == sorted(ours.collection(name).tensor_names), name
    assert got["collections"]["gradients"]  # non-empty: gradients were saved in fit
    expected = {}
    for n in ours.tensor_names():
        for s in ours.tensor(n).steps():
            expected[f"{n}@{s}"] = (ours.tensor(n).value(s), ours.mode(s).name, ours.mode_step(s))
    assert set(got["values"]) == set(expected)
    for key, (value, mode, mode_step) in expected.items():
        their_value, their_mode, their_step = got["values"][key]
        np.testing.assert_array_equal(np.asarray(their_value, dtype=value.dtype), value, key)
        assert (their_mode, their_step) == (mode, mode_step), key
    for key, l2 in got["reductions"].items():
        name, step = key.rsplit("@", 1)
        raw = ours.tensor(name).value(int(step)).astype(np.float64)
        np.testing.assert_allclose(l2, np.sqrt((raw ** 2).sum()), rtol=1e-5)
