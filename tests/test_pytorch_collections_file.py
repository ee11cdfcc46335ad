"""The collections file lists what smdebug 1.0.34's lists, on the same training script.

* Only the collections smdebug has: smdebug-lite's extra PyTorch built-ins (``inputs``,
  ``outputs``) appear only once asked for.
* Every collection that a tensor belongs to names it, with save_all too (smdebug includes every
  collection then; our hook used to fill only ``all``), and with shapes only (no raw values).

The PyTorch and XGBoost runs are compared with real smdebug's files (reference venv); the Keras
hook, which shares the code, is checked on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PT_SCRIPT = r'''
import glob, json, os, sys
import torch, torch.nn as nn
import smdebug.pytorch as smd

out, variant = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
loss_fn = nn.CrossEntropyLoss()
kw = {"out_dir": out, "save_config": smd.SaveConfig(save_interval=2)}
if "shape" in variant:
    kw["reduction_config"] = smd.ReductionConfig(save_shape=True)
if "all" in variant:
    kw["save_all"] = True
if "incl" in variant:
    kw["include_collections"] = ["weights", "biases", "gradients", "losses"]
if "regex" in variant:
    kw["include_regex"] = [r".*weight", r"gradient.*"]
hook = smd.Hook(**kw)
hook.register_module(model)
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(5):
    opt.zero_grad()
    loss_fn(model(torch.randn(3, 4)), torch.tensor([0, 1, i % 2])).backward()
    opt.step()
hook.close()
path = glob.glob(os.path.join(out, "collections", "*", "*_collections.json"))[0]
print("@@RESULT@@" + open(path).read().replace("\n", " "))
'''

XGB_SCRIPT = r'''
import glob, json, os, sys
import numpy as np, xgboost as xgb
from smdebug.xgboost import Hook

out, variant = sys.argv[1], sys.argv[2]
rng = np.random.RandomState(0)
X = rng.rand(40, 3)
y = (X[:, 0] > 0.5).astype(float)
data = xgb.DMatrix(X, label=y)
kw = {"out_dir": out, "train_data": data, "validation_data": data,
      "hyperparameters": {"max_depth": 2}}
if variant == "save_all":
    kw["save_all"] = True
else:
    from smdebug.core.reduction_config import ReductionConfig
    kw["reduction_config"] = ReductionConfig(save_shape=True)
    kw["include_collections"] = ["metrics", "feature_importance", "average_shap"]
hook = Hook(**kw)
xgb.train({"max_depth": 2, "objective": "binary:logistic", "eval_metric": "error"}, data, 3,
          evals=[(data, "train")], callbacks=[hook], verbose_eval=False)
if hasattr(hook, "close"):
    hook.close()
path = glob.glob(os.path.join(out, "collections", "*", "*_collections.json"))[0]
print("@@RESULT@@" + open(path).read().replace("\n", " "))
'''


def _collections(proc: subprocess.CompletedProcess) -> dict:
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
    assert proc.returncode == 0 and marker, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(marker[0][len("@@RESULT@@"):])
    for c in doc["collections"].values():
        c["tensor_names"] = sorted(c["tensor_names"])
    return doc


def _ours(script: str, out: str, variant: str) -> dict:
    return _collections(subprocess.run([sys.executable, "-c", script, out, variant],
                                       capture_output=True, text=True, timeout=300))


def _ref(script: str, out: str, variant: str) -> dict:
    from _pytorch_support import ref_available
    from refvenv import run_ref

    ok, reason = ref_available()
    if not ok:
        pytest.skip(reason)
    return _collections(run_ref(script, out, variant, timeout=300))


@pytest.mark.slow
def test_extension_collections_only_when_asked_for(tmp_path):
    plain = _ours(PT_SCRIPT, str(tmp_path / "plain"), "incl")["collections"]
    assert sorted(plain) == ["all", "biases", "default", "gradients", "losses", "weights"]
    # asked for: created with their regex, and they learn the tensors they select
    code = PT_SCRIPT.replace('if "incl" in variant:', 'if variant == "outputs":\n'
                             '    kw["include_collections"] = ["outputs"]\nif "incl" in variant:')
    code = code.replace("hook.register_module(model)", 'hook.get_collection("inputs")\n'
                        "hook.register_module(model)")
    asked = _ours(code, str(tmp_path / "asked"), "outputs")["collections"]
    assert asked["outputs"]["include_regex"] == [r".*_output_\d+$"]
    assert asked["outputs"]["tensor_names"] == ["0_output_0", "1_output_0", "2_output_0",
                                                 "CrossEntropyLoss_output_0", "Sequential_output_0"]
    assert asked["inputs"]["include_regex"] == [r".*_input_\d+$"]
    assert asked["inputs"]["tensor_names"] == []


@pytest.mark.slow
def test_save_all_fills_every_collection(tmp_path):
    cols = _ours(PT_SCRIPT, str(tmp_path / "run"), "all_shape")["collections"]
    assert cols["weights"]["tensor_names"] == ["Sequential_0.weight", "Sequential_2.weight"]
    assert cols["biases"]["tensor_names"] == ["Sequential_0.bias", "Sequential_2.bias"]
    assert cols["gradients"]["tensor_names"] == [f"gradient/Sequential_{i}.{p}" for i in (0, 2)
                                                 for p in ("bias", "weight")]
    assert len(cols["all"]["tensor_names"]) == 19  # (parameters, gradients, every module's I/O)
    assert "inputs" not in cols and "outputs" not in cols


@pytest.mark.reference
@pytest.mark.parametrize("variant", ["incl", "incl_shape", "all", "all_shape", "regex",
                                     "regex_shape_incl"])
def test_pytorch_collections_file_as_smdebug(tmp_path, variant):
    ref = _ref(PT_SCRIPT, str(tmp_path / "ref"), variant)
    ours = _ours(PT_SCRIPT, str(tmp_path / "ours"), variant)
    assert ours == ref


@pytest.mark.reference
@pytest.mark.parametrize("variant", ["save_all", "shape"])
def test_xgboost_collections_file_as_smdebug(tmp_path, variant):
    ref = _ref(XGB_SCRIPT, str(tmp_path / "ref"), variant)
    ours = _ours(XGB_SCRIPT, str(tmp_path / "ours"), variant)
    assert {n: c["tensor_names"] for n, c in ours["collections"].items()} == \
        {n: c["tensor_names"] for n, c in ref["collections"].items()}


@pytest.mark.slow
def test_keras_save_all_fills_every_collection(tmp_path):
    pytest.importorskip("tensorflow")
    script = r'''
import glob, os, sys
import numpy as np
import tensorflow as tf
import smdebug_lite.tensorflow as smd

out = sys.argv[1]
hook = smd.KerasHook(out_dir=out, save_config=smd.SaveConfig(save_interval=2), save_all=True,
                     reduction_config=smd.ReductionConfig(save_shape=True))
layers = tf.keras.layers
model = tf.keras.Sequential([tf.keras.Input((4,)), layers.Dense(3), layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(np.random.rand(16, 4), np.random.rand(16, 1), epochs=1, batch_size=4, callbacks=[hook],
          verbose=0)
hook.close()
path = glob.glob(os.path.join(out, "collections", "*", "*_collections.json"))[0]
print("@@RESULT@@" + open(path).read().replace("\n", " "))
'''
    cols = _ours(script, str(tmp_path / "run"), "")["collections"]
    dense = ["sequential/dense", "sequential/dense_1"]
    assert cols["weights"]["tensor_names"] == [f"{d}/kernel:0" for d in dense]
    assert cols["biases"]["tensor_names"] == [f"{d}/bias:0" for d in dense]
    assert len(cols["gradients"]["tensor_names"]) == 4
    assert cols["losses"]["tensor_names"] == ["loss"]
