"""The disk fills up mid-run, or is full before the hook writes anything: training goes on,
what was written stays readable and exact, no half-written file is left, and the failure is
reported once, with its cause and without a traceback. For each framework's hook (PyTorch,
Keras, XGBoost), on a real full filesystem: a 1 MiB tmpfs mounted in a private mount namespace
(`unshare -m`, which needs root or CAP_SYS_ADMIN; skipped elsewhere)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Mounts a 1 MiB tmpfs on $1, then runs the rest of the arguments.
NAMESPACE_SCRIPT = 'mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"'

# Each script trains 60 steps saving about 80 KB a step (the disk is full after a dozen), keeps
# what the hook should have saved, captured independently, and prints what it found.
PROLOGUE = """
    import glob, json, sys
    import numpy as np
    from smdebug_lite.trials import create_trial

    out = sys.argv[1] + "/run"
    if sys.argv[2] == "full":  # full before the hook writes anything
        try:
            with open(sys.argv[1] + "/filler", "wb") as f:
                while True:
                    f.write(bytes(65536))
        except OSError:
            pass
"""

EPILOGUE = """
    files = glob.glob(out + "/**/*", recursive=True)
    steps, exact = [], True
    if any(f.endswith(".tfevents") for f in files):
        trial = create_trial(out)
        steps = trial.steps()
        exact = all(matches(trial, s) for s in steps)
    print("@@RESULT@@" + json.dumps({
        "trained": trained, "disabled": hook.disabled, "steps": steps, "exact": bool(exact),
        "tmp_files": [f for f in files if f.endswith(".tmp")]}))
"""

TORCH = """
    import torch
    from torch import nn
    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    tensorboard = sys.argv[2] == "mid-run, tensorboard"
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses"],
                    export_tensorboard=tensorboard,
                    tensorboard_dir=sys.argv[1] + "/tb" if tensorboard else None)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    weights = {}
    for step in range(60):
        weights[step] = model[0].weight.detach().clone().numpy()
        opt.zero_grad()
        loss_fn(model(torch.randn(32, 64)), torch.randint(0, 10, (32,))).backward()
        opt.step()
    hook.close()
    trained = step + 1

    def matches(trial, s):
        return (trial.tensor("Sequential_0.weight").value(s) == weights[s]).all()
"""

KERAS = """
    import keras
    from smdebug_lite.tensorflow import KerasHook, SaveConfig

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, name="hidden"),
                              keras.layers.Dense(10, name="out")], name="net")
    model.compile(keras.optimizers.SGD(0.01), "mse")
    hook = KerasHook(out, save_config=SaveConfig(save_interval=1),
                     include_collections=["weights", "gradients", "losses"])

    class Recorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.kernels, self.losses = [], []

        def on_train_batch_begin(self, batch, logs=None):
            self.kernels.append(np.array(self.model.get_layer("hidden").kernel))

        def on_train_batch_end(self, batch, logs=None):
            self.losses.append(logs["loss"])

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(240, 64)).astype("float32"), rng.normal(size=(240, 10)).astype("float32")
    rec = Recorder()
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0, callbacks=[hook, rec])
    hook.close()
    trained = len(rec.losses)

    def matches(trial, s):
        return ((trial.tensor("net/hidden/kernel:0").value(s) == rec.kernels[s]).all()
                and np.allclose(trial.tensor("loss").value(s), [rec.losses[s]]))
"""

XGBOOST = """
    import xgboost as xgb
    from smdebug_lite.xgboost import Hook, SaveConfig

    rng = np.random.default_rng(0)
    # full_shap/<feature> is the whole (rows, features + 1) matrix: about 48 KB a step here
    x = rng.normal(size=(200, 5))
    features = [f"x{i}" for i in range(5)]
    dtrain = xgb.DMatrix(x, label=(x[:, 0] + rng.normal(size=200) > 0), feature_names=features)
    params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "seed": 0}
    hook = Hook(out, save_config=SaveConfig(save_interval=1),
                include_collections=["full_shap", "metrics"], train_data=dtrain)
    booster = xgb.train(params, dtrain, 60, evals=[(dtrain, "train")], callbacks=[hook],
                        verbose_eval=False)
    hook.close()
    trained = booster.num_boosted_rounds()

    def matches(trial, s):
        contribs = booster[: s + 1].predict(dtrain, pred_contribs=True)
        return all(np.allclose(trial.tensor(f"full_shap/{f}").value(s), contribs, rtol=1e-6)
                   for f in features)
"""

SCRIPTS = {name: textwrap.dedent(PROLOGUE + body + EPILOGUE)
           for name, body in (("torch", TORCH), ("keras", KERAS), ("xgboost", XGBOOST))}


@pytest.mark.parametrize(("framework", "when", "writer"), [
    pytest.param("torch", "mid-run", "process", marks=pytest.mark.slow),
    ("torch", "mid-run", "thread"),
    pytest.param("torch", "full", "process", marks=pytest.mark.slow),
    pytest.param("torch", "full", "thread", marks=pytest.mark.slow),
    # (TensorBoard files are written by the hook itself)
    pytest.param("torch", "mid-run, tensorboard", "process", marks=pytest.mark.slow),
    pytest.param("keras", "mid-run", "process", marks=pytest.mark.slow),
    pytest.param("keras", "full", "process", marks=pytest.mark.slow),
    pytest.param("xgboost", "mid-run", "process", marks=pytest.mark.slow),
    ("xgboost", "full", "process")])
def test_full_disk_stops_saving_and_keeps_what_was_written(tmp_path, framework, writer, when):
    pytest.importorskip(framework)
    mount = tmp_path / "disk"
    mount.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPTS[framework])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "SMDEBUG_WRITER": writer,
           "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2"}
    try:
        proc = subprocess.run(["unshare", "-m", "sh", "-c", NAMESPACE_SCRIPT, "sh", str(mount),
                               sys.executable, str(script), str(mount), when],
                              capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    except FileNotFoundError:
        pytest.skip("unshare(1) is not installed")
    if proc.returncode != 0 and proc.stderr.startswith(("unshare:", "mount:")):
        pytest.skip(f"no private tmpfs mount here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.split("@@RESULT@@")[1])
    assert result["trained"] == 60 and result["disabled"]
    steps = result["steps"]
    assert steps == list(range(len(steps))), steps
    assert 3 <= len(steps) < 60 if when.startswith("mid-run") else steps == [], steps
    assert result["exact"] and result["tmp_files"] == []
    output = proc.stdout + proc.stderr  # (the library logs to stdout)
    errors = [line for line in output.splitlines() if " ERROR " in line]
    assert "Traceback" not in output, output
    where = mount / ("tb" if "tensorboard" in when else "run")
    assert any("stopped saving tensors" in e and "No space left on device" in e
               and str(where) in e for e in errors), errors
    # The writer's cause, then the hook's consequence; nothing at each later step or at close.
    assert len(errors) <= 2, errors
