"""The launcher runs an unmodified Keras script (tf.keras, fit with validation, evaluate) and the
hook from the DebugHookConfig JSON saves what the JSON asks for."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lazy_module import require_module

require_module("tensorflow")

from hook_config_files import write_hook_config  # noqa: E402

from smdebug_lite import modes  # noqa: E402
from smdebug_lite.trials import create_trial  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = rng.integers(0, 3, size=32)
    model = tf.keras.Sequential([tf.keras.Input((4,)),
                                 tf.keras.layers.Dense(8, activation="relu", name="hidden"),
                                 tf.keras.layers.Dense(3, name="logits")])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), verbose=0)
    model.evaluate(x, y, batch_size=16, verbose=0)
    print("TRAINING DONE")
""")


@pytest.mark.parametrize("keras_version", [pytest.param(3, marks=pytest.mark.slow),
                                           pytest.param(2, marks=pytest.mark.slow)])
def test_unmodified_keras_script(tmp_path, keras_version):
    """Keras 3 (tf.keras on TF 2.16+) and Keras 2 (tf.keras is tf_keras under
    TF_USE_LEGACY_KERAS=1, imported by TensorFlow after the launcher attached to Keras 3)."""
    if keras_version == 2:
        pytest.importorskip("tf_keras")
    out = tmp_path / "tensors"
    config = write_hook_config(tmp_path, out, {
        "gradients": None,
        "hidden_out": {"include_regex": "hidden/outputs"},
        "losses": {"save_interval": "1"},
    }, hook_parameters={"save_interval": "2"})
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("USE_SMDEBUG", "TRAINING_JOB_NAME", "TF_USE_LEGACY_KERAS")}
    env.update(PYTHONPATH=str(REPO), SMDEBUG_CONFIG_FILE_PATH=str(config))
    if keras_version == 2:
        env["TF_USE_LEGACY_KERAS"] = "1"
    proc = subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", "train.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "TRAINING DONE" in proc.stdout
    assert (out / "training_job_end.ts").exists()
    trial = create_trial(str(out))
    # Keras 3 names variables by path (model prefix), Keras 2 by TF graph name.
    grad = "gradients/sequential/hidden/kernelGrad" if keras_version == 3 else \
        "gradients/hidden/kernelGrad"
    assert trial.tensor(grad).steps(mode=modes.TRAIN) == [0, 2, 4, 6]
    assert trial.tensor("hidden/outputs").steps(mode=modes.TRAIN) == [0, 2, 4, 6]
    assert trial.tensor("hidden/outputs").steps(mode=modes.EVAL) == [0, 2, 4]
    assert trial.tensor("loss").steps(mode=modes.TRAIN) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert trial.tensor("loss").steps(mode=modes.EVAL) == [0, 1, 2, 3, 4, 5]
    assert trial.tensor("accuracy").steps(mode=modes.TRAIN) == [0, 2, 4, 6]
    assert "val_loss" in trial.tensor_names()
