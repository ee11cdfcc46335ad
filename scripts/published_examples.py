"""Run the smdebug programs published in amazon-sagemaker-examples' Debugger folders.

Given a fetched copy of that repository (a git directory or a checkout), each program's files
are materialized, unchanged, into a temporary directory and driven there with small synthetic
data by a driver kept in this file: training scripts are imported and their own functions are
called (the dataset download, the pretrained torchvision model and the SageMaker job around
them are what the driver stands in for), custom rule files are run by the rule runner as a rule
job would run them, and notebook analysis cells are executed on a trial our hooks wrote. Nothing
from the examples is copied into this repository.

Examples removed from the repository's tip (the Debugger folder was pruned in 2023; the rest
moved under ``archived/``) are read from the last commit that had them when SRC is a git
directory. Plotting and display packages the notebooks import (matplotlib, seaborn, IPython) are
always stood in for by inert objects, vision ones (shap, cv2, torchvision) when not installed:
the programs' smdebug calls are what is checked.

Usage (see docs/compatibility.md):

    python scripts/published_examples.py SRC [--python PY] [--only NAME ...] [--keep]

Prints one PASS/FAIL/SKIP line per program and a closing ``N passed, M failed`` line; the exit
status is 1 when any program failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

DEBUGGER = "sagemaker-debugger"
PHASE_TIMEOUT_S = 600

# ---------------------------------------------------------------------------------------------
# Reading the examples
# ---------------------------------------------------------------------------------------------


def _normalize(path: str) -> str:
    """The tip names folders with leading spaces and keeps old examples under ``archived/``."""
    parts = [p.strip() for p in path.split("/")]
    if parts and parts[0] == "archived":
        parts = parts[1:]
    return "/".join(parts)


class ExampleSource:
    """Files of a fetched amazon-sagemaker-examples, from a git directory or a checkout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.git_dir = self._find_git_dir(root)
        self._paths: dict[str, str] = {}
        if self.git_dir is not None:
            listing = self._git("ls-tree", "-r", "--name-only", "-z", "HEAD")
            for path in listing.split("\0"):
                if path:
                    self._paths.setdefault(_normalize(path), path)
        else:
            for file in root.rglob("*"):
                if file.is_file():
                    rel = file.relative_to(root).as_posix()
                    self._paths.setdefault(_normalize(rel), rel)

    @staticmethod
    def _find_git_dir(root: Path) -> Path | None:
        if (root / "HEAD").is_file() and (root / "objects").is_dir():
            return root
        if (root / ".git").exists():
            return root / ".git"
        return None

    def _git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise LookupError(done.stderr.strip() or f"git {' '.join(args)} failed")
        return done.stdout

    def read(self, rel: str) -> str | None:
        """Text of ``sagemaker-debugger/<rel>`` (or of ``<rel>`` at the top), or None."""
        for key in (f"{DEBUGGER}/{rel}", rel):
            if key in self._paths:
                actual = self._paths[key]
                if self.git_dir is None:
                    return (self.root / actual).read_text(encoding="utf-8")
                return self._git("show", f"HEAD:{actual}")
        if self.git_dir is None:
            return None
        path = f"{DEBUGGER}/{rel}"
        try:
            last = self._git("log", "-1", "--format=%H", "HEAD", "--", path).strip()
            return self._git("show", f"{last}^:{path}") if last else None
        except LookupError:
            return None


# ---------------------------------------------------------------------------------------------
# What every driver imports (written next to the example files as _published_prelude.py)
# ---------------------------------------------------------------------------------------------

PRELUDE = r'''
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types

OUT = os.path.abspath("trial")
STAND_INS = ("torchvision", "matplotlib", "mpl_toolkits", "seaborn", "shap", "IPython", "cv2")


class Anything:
    """An inert plotting/display/vision object: every attribute and call gives another one."""

    def __init__(self, name="anything"):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything(name)

    def __call__(self, *args, **kwargs):
        if self._name == "subplots":
            return Anything("figure"), Anything("axes")
        if self._name == "plot":
            return [Anything("line")]
        return Anything(self._name)

    def __getitem__(self, key):
        return Anything("item")

    def __iter__(self):
        return iter(())


def _stand_in_attribute(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return Anything(name)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _stand_in_attribute
        return module

    def exec_module(self, module):
        return None


# Plots and displays are never checked, and a real matplotlib handed a stood-in seaborn's objects
# fails, so those are always stood in; the others only when not installed.
ALWAYS = ("matplotlib", "mpl_toolkits", "seaborn", "IPython")
sys.meta_path.insert(0, _StandInFinder(ALWAYS))
_missing = tuple(r for r in STAND_INS
                 if r not in ALWAYS and importlib.util.find_spec(r) is None)
if _missing:
    sys.meta_path.append(_StandInFinder(_missing))

try:
    import torch

    torch.set_num_threads(1)
except ImportError:
    pass


class LocalEstimator:
    """What the notebooks ask a finished SageMaker estimator for."""

    def latest_job_debugger_artifacts_path(self):
        return OUT


class FinishedJobClient:
    def describe_training_job(self, TrainingJobName=None):
        return {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}


def code_cells(notebook):
    with open(notebook, encoding="utf-8") as f:
        nb = json.load(f)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            lines = [ln for ln in src.splitlines() if not ln.lstrip().startswith(("!", "%"))]
            yield src, "\n".join(lines)


def run_cells(notebook, ns, start, stop=None, skip=()):
    """Run the notebook's code cells from the one containing `start` up to `stop`."""
    ran, on = 0, False
    for src, code in code_cells(notebook):
        on = on or start in src
        if on and stop is not None and stop in src:
            break
        if on and not any(s in src for s in skip):
            exec(compile(code, f"{notebook} cell {ran}", "exec"), ns)
            ran += 1
    if not ran:
        raise LookupError(f"{notebook}: no code cell from one containing {start!r}")
    return ns


def load_source(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
'''

# ---------------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------------


@dataclass
class Phase:
    code: str
    launcher: tuple[str, ...] = ()  # ("-m", "smdebug_lite.container"): zero-code-change training
    ok_codes: tuple[int, ...] = (0,)
    expect_output: str = ""  # must appear in stdout/stderr (a rule's own log line)


@dataclass
class Program:
    name: str
    framework: str
    files: dict[str, str]  # file name in the work dir -> path under sagemaker-debugger/
    hook_config: dict | None
    phases: list[Phase] = field(default_factory=list)
    note: str = ""  # what the example itself assumes, printed with its line


def _collections(**params: dict[str, str]) -> list[dict]:
    return [{"CollectionName": k, "CollectionParameters": v} for k, v in params.items()]


def _rule_job(source: str, rule: str, *params: str, expect: str = "") -> Phase:
    """A custom rule evaluated as SageMaker's Rule.custom(...) job would evaluate it."""
    args = ["--source", source, "--rule", rule, "--base-trial", "trial", "--opt-ml", "opt_ml"]
    for p in params:
        args += ["-p", p]
    args += ["--trial-timeout", "30"]
    return Phase("", ("-m", "smdebug_lite.rule_runner", *args), ok_codes=(0, 1),
                 expect_output=expect)


PT_MNIST_TRAIN = """
import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset
import pytorch_mnist as ex

torch.manual_seed(0)

def batches(n):
    data = TensorDataset(torch.randn(n, 1, 28, 28), torch.randint(0, 10, (n,)))
    return DataLoader(data, batch_size=8)

# main() of the example, with synthetic batches instead of the MNIST download
model = ex.Net()
loss_fn = torch.nn.NLLLoss()
hook = ex.smd.Hook.create_from_json_file()
hook.register_hook(model)
hook.register_loss(loss_fn)
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
args = argparse.Namespace(log_interval=2, dry_run=False)
for epoch in (1, 2):
    ex.train(args, model, loss_fn, "cpu", batches(24), optimizer, epoch, hook)
    ex.test(model, loss_fn, "cpu", batches(16), hook)
"""

PT_MNIST_ANALYSIS = """
ns = {"estimator": LocalEstimator()}
run_cells("analysis.ipynb", ns, "create_trial(", stop="rule_output_path")
trial, ModeKeys = ns["trial"], ns["ModeKeys"]
for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
    steps, vals = ns["get_data"](trial, "NLLLoss_output_0", mode)
    assert steps and len(vals) == len(steps), (mode, steps)
"""

PRUNING_TRAIN = """
import os
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the example pickles a model
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import train as ex


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn1(self.conv1(x)))


class SmallNet(nn.Module):  # stands in for the notebook's torchvision resnet18
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.layer1 = nn.Sequential(Block())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layer1(self.conv1(x))), 1))


torch.manual_seed(0)
model = SmallNet()
torch.save({"model": model, "state_dict": model.state_dict()}, "model_checkpoint")

def batches(n):
    return DataLoader(TensorDataset(torch.randn(n, 3, 16, 16), torch.randint(0, 4, (n,))),
                      batch_size=4)

ex.loader = lambda batch_size=128: (batches(16), batches(8))  # instead of ImageFolder channels
ex.train(epochs=2, batch_size=4, learning_rate=0.01)
"""

PRUNING_CUSTOM_NAMES = """
from smdebug.trials import create_trial
names = set(create_trial(OUT).tensor_names())
# what CustomHook.forward_hook writes, which the stock hook does not
wanted = {
    "layer1.0.relu_0_output_0",
    "gradient/layer1.0.relu_ReLU_output",
    "layer1.0.bn1.running_mean_output_0",
    "layer1.0.bn1.running_var_output_0",
    "CrossEntropyLoss_0_input_0",
}
assert wanted <= names, f"CustomHook tensors missing: {sorted(wanted - names)}"
"""

PRUNING_RANKS = """
from smdebug.trials import create_trial
ns = {
    "smdebug_trial": create_trial(OUT),
    "activation_outputs": ["layer1.0.relu_0_output_0"],
    "gradients": ["gradient/layer1.0.relu_ReLU_output"],
}
run_cells("notebook.ipynb", ns, "def compute_filter_ranks", stop="model_resnet.prune")
assert ns["filters"]["layer1.0.relu_0_output_0"].shape == (8,), ns["filters"]
assert len(ns["filters_list"]) == 8
"""

CAM_TRAIN = """
import argparse
import types
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import train as ex


class BasicBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn1(self.conv1(x)))


class ResNet(nn.Module):  # stands in for torchvision's resnet18; same class name, tiny
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(BasicBlock())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 1000)

    def forward(self, x):
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


torch.manual_seed(0)

def batches(n, size):
    data = TensorDataset(torch.randn(n, 3, 224, 224), torch.randint(0, 43, (n,)))
    return DataLoader(data, batch_size=size)

ex.args = argparse.Namespace(learning_rate=0.01, momentum=0.9)
ex.models = types.SimpleNamespace(resnet18=lambda pretrained=False: ResNet())
ex.get_dataloaders = lambda train_size, val_size: (batches(4, train_size), batches(2, val_size))
ex.train_model(epochs=1, batch_size_train=2, batch_size_val=1)
"""

CAM_ANALYSIS = """
import time
time.sleep = lambda seconds: None  # the notebook polls a running job
from smdebug.trials import create_trial
drawn = []
ns = {"trial": create_trial(OUT), "description": {"SecondaryStatus": "Training"},
      "client": FinishedJobClient(), "job_name": "local", "plot": lambda *a: drawn.append(a)}
# the notebook's plot() is cv2/matplotlib only; the saliency maps it is given are checked
run_cells("notebook.ipynb", ns, "biases, gradients = []", skip=("def plot(",))
assert drawn and drawn[0][0].shape == (224, 224), [a[0].shape for a in drawn]
assert ns["gradients"] and ns["biases"] and ns["bn_weights"], ns
assert ns["rendered_steps"], "no EVAL step was rendered"
"""

TF_CIFAR_STAND_IN = """
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)


class SmallCifar10:  # instead of the cifar10 download
    @staticmethod
    def load_data():
        def part(n):
            return (rng.integers(0, 255, (n, 32, 32, 3)).astype("uint8"),
                    rng.integers(0, 10, (n, 1)))
        return part(64), part(32)


def small_model():  # instead of ResNet50(weights=None, input_shape=(32, 32, 3), classes=10)
    return tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(4, 3, strides=4, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])
"""

TF_BYOC_TRAIN = (
    TF_CIFAR_STAND_IN
    + """
import tf_keras_resnet_byoc as ex
ex.cifar10 = SmallCifar10
# main() of the example, with the small model
model = small_model()
hook = ex.smd.KerasHook.create_from_json_file()
opt = tf.keras.optimizers.Adam(learning_rate=0.001)
model.compile(loss="categorical_crossentropy", optimizer=opt, metrics=["accuracy"])
ex.train(16, 2, model, hook)
"""
)

TF_BYOC_ANALYSIS = """
ns = {"estimator": LocalEstimator(), "train_save_interval": 2, "eval_save_interval": 1}
run_cells("custom_container.ipynb", ns, "create_trial(")
run_cells("byoc.ipynb", ns, "create_trial(", stop="rule_job_summary")
assert ns["trial"].tensor_names(regex="scalar"), ns["trial"].tensor_names()
assert len(ns["y"]) and len(ns["y_val"]), (ns["y"], ns["y_val"])
"""

TF_CUSTOM_RULE_TRAIN = (
    TF_CIFAR_STAND_IN
    + """
import tf_keras_resnet_byoc as ex
ex.cifar10 = SmallCifar10
# main() of the example; its train() reads a module-level `hook` that main() never sets
model = small_model()
hook = ex.smd.KerasHook.create_from_json_file()
ex.hook = hook
opt = hook.wrap_optimizer(tf.keras.optimizers.Adam())
model.compile(loss="categorical_crossentropy", optimizer=opt, metrics=["accuracy"])
ex.train(16, 1, model)
"""
)

HAS_GRADIENTS = """
from smdebug.trials import create_trial
assert create_trial(OUT).tensor_names(collection="gradients"), "no gradients saved"
"""

TF_ZCC_TRAIN = (
    TF_CIFAR_STAND_IN
    + """
ex = load_source("{script}", "example_script")
ex.cifar10 = SmallCifar10
model = small_model()
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
ex.train(16, 2, model)
"""
)

TF_ZCC_ANALYSIS = """
ns = {"estimator": LocalEstimator()}
run_cells("notebook.ipynb", ns, "create_trial(", stop="rule_job_summary")
trial = ns["trial"]
for coll in ("weights", "losses"):
    assert trial.tensor_names(collection=coll), (coll, trial.tensor_names())
"""

TF_BUILTIN_RULE_ANALYSIS = """
ns = {"estimator": LocalEstimator()}
run_cells("notebook.ipynb", ns, "create_trial(", stop="rule_job_summary")
trial, ModeKeys = ns["trial"], ns["ModeKeys"]
for name in ("loss", "accuracy"):
    for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
        steps, vals = ns["get_data"](trial, name, mode)
        assert steps and len(vals) == len(steps), (name, mode, trial.tensor_names())
"""

XGB_CENSUS_TRAIN = """
import numpy as np
import xgboost as xgb

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 4))
y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
dtrain = xgb.DMatrix(X[:150], label=y[:150])  # the notebook plots row 100
dval = xgb.DMatrix(X[150:], label=y[150:])
params = {"max_depth": 3, "eta": 0.3, "objective": "binary:logistic", "nthread": 1}
xgb.train(params, dtrain, num_boost_round=6, evals=[(dtrain, "train"), (dval, "validation")])
"""

XGB_CENSUS_ANALYSIS = """
import numpy as np
import pandas as pd
X_train = pd.DataFrame(np.random.default_rng(0).normal(size=(150, 4)), columns=list("ABCD"))
import shap  # imported by an earlier cell of the notebook
ns = {"xgboost_estimator": LocalEstimator(), "feature_names": list("ABCD"), "shap": shap,
      "X_train": X_train, "X_train_display": X_train}
run_cells("notebook.ipynb", ns, "create_trial(")
assert ns["shap_no_base"].shape == (150, 4), ns["shap_no_base"].shape
assert np.ndim(ns["shap_base_value"]) == 0, ns["shap_base_value"]
assert len(ns["outlier_indices"]) == 6
"""

XGB_REALTIME_TRAIN = """
import numpy as np
import xgboost as xgb

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 6))
y = rng.integers(0, 10, 200)
dtrain = xgb.DMatrix(X[:150], label=y[:150])
dval = xgb.DMatrix(X[150:], label=y[150:])
params = {"max_depth": 3, "eta": 0.1, "objective": "multi:softmax", "num_class": 10,
          "nthread": 1}
xgb.train(params, dtrain, num_boost_round=4, evals=[(dtrain, "train"), (dval, "validation")])
"""

XGB_REALTIME_ANALYSIS = """
import time
time.sleep = lambda seconds: None
ns = {"xgboost_algorithm_mode_estimator": LocalEstimator(), "client": FinishedJobClient(),
      "job_name": "local"}
run_cells("notebook.ipynb", ns, "create_trial(")
trial = ns["trial"]
assert trial.steps() and trial.loaded_all_steps
assert trial.tensor("labels").value(trial.steps()[0]).shape == (50,)
"""

TENSOR_ANALYSIS_TRAIN = """
import torch
from torch import nn
import smdebug.pytorch as smd

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv0 = nn.Conv2d(1, 4, 3)
        self.conv0_relu = nn.ReLU()
        self.dense0 = nn.Linear(4 * 26 * 26, 10)

    def forward(self, x):
        return self.dense0(torch.flatten(self.conv0_relu(self.conv0(x)), 1))


model, loss_fn = Net(), nn.CrossEntropyLoss()
hook = smd.Hook.create_from_json_file()
hook.register_module(model)
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook.set_mode(smd.modes.TRAIN)
for _ in range(4):
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
hook.close()
"""

TENSOR_ANALYSIS_RULES = """
from smdebug.trials import create_trial
ns = {"trial1": create_trial(OUT)}
run_cells("notebook.ipynb", ns, "from smdebug.rules.rule_invoker import invoke_rule",
          stop="entry_point_script", skip=("utils.create_interactive", "Image(url"))
assert ns["rule"].tensors, "the last notebook rule collected nothing"
"""

CUSTOM_RULE_PARAMS = ("threshold=20.0",)


def programs() -> list[Program]:
    save_2 = {"save_interval": "2"}
    return [
        Program(
            "pytorch_model_debugging/pytorch_mnist.py + notebook analysis",
            "pytorch",
            {
                "pytorch_mnist.py": "pytorch_model_debugging/scripts/pytorch_mnist.py",
                "analysis.ipynb": "pytorch_model_debugging/pytorch_script_change_smdebug.ipynb",
            },
            {
                "CollectionConfigurations": _collections(
                    losses={"save_interval": "1"}, weights=save_2, gradients=save_2
                )
            },
            [Phase(PT_MNIST_TRAIN), Phase(PT_MNIST_ANALYSIS)],
        ),
        Program(
            "pytorch_iterative_model_pruning: custom_hook.py + train.py",
            "pytorch",
            {
                "custom_hook.py": "pytorch_iterative_model_pruning/src/custom_hook.py",
                "train.py": "pytorch_iterative_model_pruning/src/train.py",
            },
            {
                "CollectionConfigurations": _collections(
                    custom_collection={
                        "include_regex": ".*relu|.*weight|.*bias|.*running_mean|.*running_var"
                        "|.*CrossEntropyLoss",
                        "save_interval": "2",
                    }
                )
            },
            [Phase(PRUNING_TRAIN), Phase(PRUNING_CUSTOM_NAMES)],
            note="written for smdebug 0.5.0 (its requirements.txt): the real smdebug 1.0.34 "
            "has no Hook.module_maps either",
        ),
        Program(
            "pytorch_iterative_model_pruning: custom_rule/check_accuracy.py (rule job)",
            "pytorch",
            {
                "custom_hook.py": "pytorch_iterative_model_pruning/src/custom_hook.py",
                "train.py": "pytorch_iterative_model_pruning/src/train.py",
                "check_accuracy.py": "pytorch_iterative_model_pruning/custom_rule/"
                "check_accuracy.py",
            },
            {
                "CollectionConfigurations": _collections(
                    custom_collection={"include_regex": ".*CrossEntropyLoss", "save_interval": "1"}
                )
            },
            [
                Phase(PRUNING_TRAIN),
                _rule_job(
                    "check_accuracy.py",
                    "check_accuracy",
                    "previous_accuracy=0.0",
                    expect="current accuracy",
                ),
            ],
            note="written for smdebug 0.5.0 (its requirements.txt): the real smdebug 1.0.34 "
            "has no Hook.module_maps either",
        ),
        Program(
            "pytorch_iterative_model_pruning: notebook filter ranks",
            "pytorch",
            {
                "custom_hook.py": "pytorch_iterative_model_pruning/src/custom_hook.py",
                "train.py": "pytorch_iterative_model_pruning/src/train.py",
                "notebook.ipynb": "pytorch_iterative_model_pruning/"
                "iterative_model_pruning_resnet.ipynb",
            },
            {
                "CollectionConfigurations": _collections(
                    custom_collection={"include_regex": ".*relu", "save_interval": "2"}
                )
            },
            [Phase(PRUNING_TRAIN), Phase(PRUNING_RANKS)],
            note="written for smdebug 0.5.0 (its requirements.txt): the real smdebug 1.0.34 "
            "has no Hook.module_maps either",
        ),
        Program(
            "cnn_class_activation_maps: custom_hook.py + train.py + notebook analysis",
            "pytorch",
            {
                "custom_hook.py": "model_specific_realtime_analysis/cnn_class_activation_maps/"
                "entry_point/custom_hook.py",
                "train.py": "model_specific_realtime_analysis/cnn_class_activation_maps/"
                "entry_point/train.py",
                "notebook.ipynb": "model_specific_realtime_analysis/cnn_class_activation_maps/"
                "cnn_class_activation_maps.ipynb",
            },
            {
                "CollectionConfigurations": _collections(
                    custom_collection={
                        "include_regex": ".*bn|.*bias|.*downsample|.*ResNet_input|.*image|.*fc_output"
                        "|.*CrossEntropyLoss",
                        "train.save_interval": "100",
                        "eval.save_interval": "1",
                    }
                )
            },
            [Phase(CAM_TRAIN), Phase(CAM_ANALYSIS)],
        ),
        Program(
            "mnist_tensor_analysis: notebook custom rules on a PyTorch trial",
            "pytorch",
            {
                "notebook.ipynb": "mnist_tensor_analysis/mnist_tensor_analysis.ipynb",
                "utils.py": "mnist_tensor_analysis/utils.py",
            },
            {"HookParameters": {"save_all": "true", "save_interval": "1"}},
            [Phase(TENSOR_ANALYSIS_TRAIN), Phase(TENSOR_ANALYSIS_RULES)],
            note="the notebook pins smdebug 1.0.0 and calls Rule.__init__(base_trial); "
            "smdebug 1.0.34 requires action_str there",
        ),
        Program(
            "tensorflow2 custom container / BYOC: tf_keras_resnet_byoc.py + notebook analysis",
            "tensorflow",
            {
                "tf_keras_resnet_byoc.py": "tensorflow2/tensorflow2_keras_custom_container/src/"
                "tf_keras_resnet_byoc.py",
                "custom_container.ipynb": "tensorflow2/tensorflow2_keras_custom_container/"
                "tf2-keras-custom-container.ipynb",
                "byoc.ipynb": "build_your_own_container_with_debugger/debugger_byoc.ipynb",
            },
            {
                "CollectionConfigurations": _collections(
                    losses={"train.save_interval": "2", "eval.save_interval": "1"}
                )
            },
            [Phase(TF_BYOC_TRAIN), Phase(TF_BYOC_ANALYSIS)],
        ),
        Program(
            "tensorflow_keras_custom_rule: wrap_optimizer + rules/my_custom_rule.py (rule job)",
            "tensorflow",
            {
                "tf_keras_resnet_byoc.py": "tensorflow_keras_custom_rule/src/"
                "tf_keras_resnet_byoc.py",
                "my_custom_rule.py": "tensorflow_keras_custom_rule/rules/my_custom_rule.py",
            },
            {"CollectionConfigurations": _collections(gradients={"save_interval": "1"})},
            [
                Phase(TF_CUSTOM_RULE_TRAIN),
                Phase(HAS_GRADIENTS),
                _rule_job("my_custom_rule.py", "CustomGradientRule", *CUSTOM_RULE_PARAMS),
            ],
            note="the script's train() reads a global `hook` its main() never sets; the "
            "driver sets it",
        ),
        Program(
            "tensorflow2_zero_code_change: keras_fit_zero_code_change.py + notebook analysis",
            "tensorflow",
            {
                "script.py": "tensorflow2/tensorflow2_zero_code_change/src/"
                "keras_fit_zero_code_change.py",
                "notebook.ipynb": "tensorflow2/tensorflow2_zero_code_change/"
                "tf2-keras-default-container.ipynb",
            },
            {
                "HookParameters": {"save_interval": "2"},
                "CollectionConfigurations": _collections(
                    weights={},
                    biases={"save_interval": "2", "end_step": "500"},
                    gradients={},
                    losses={},
                ),
            },
            [
                Phase(TF_ZCC_TRAIN.replace("{script}", "script.py"),
                      ("-m", "smdebug_lite.container")),
                Phase(TF_ZCC_ANALYSIS),
            ],
        ),
        Program(
            "tensorflow_builtin_rule: tf-resnet50-cifar10.py (zero code change) + notebook",
            "tensorflow",
            {
                "script.py": "tensorflow_builtin_rule/src/tf-resnet50-cifar10.py",
                "notebook.ipynb": "tensorflow_builtin_rule/tf-mnist-builtin-rule.ipynb",
            },
            {
                "CollectionConfigurations": _collections(
                    losses={"save_interval": "1"}, metrics={"save_interval": "1"}
                )
            },
            [
                Phase(TF_ZCC_TRAIN.replace("{script}", "script.py"),
                      ("-m", "smdebug_lite.container")),
                Phase(TF_BUILTIN_RULE_ANALYSIS),
            ],
        ),
        Program(
            "xgboost_census_explanations: notebook analysis (SHAP, feature importance)",
            "xgboost",
            {"notebook.ipynb": "xgboost_census_explanations/xgboost-census-debugger-rules.ipynb"},
            {
                "CollectionConfigurations": _collections(
                    metrics=save_2, feature_importance=save_2, full_shap=save_2, average_shap=save_2
                )
            },
            [Phase(XGB_CENSUS_TRAIN, ("-m", "smdebug_lite.container")), Phase(XGB_CENSUS_ANALYSIS)],
        ),
        Program(
            "xgboost_realtime_analysis: notebook analysis (confusion matrix per step)",
            "xgboost",
            {"notebook.ipynb": "xgboost_realtime_analysis/xgboost-realtime-analysis.ipynb"},
            {
                "CollectionConfigurations": _collections(
                    metrics=save_2, predictions=save_2, labels=save_2
                )
            },
            [Phase(XGB_REALTIME_TRAIN, ("-m", "smdebug_lite.container")),
             Phase(XGB_REALTIME_ANALYSIS)],
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------


_EXCEPTION_LINE = re.compile(r"^(?:[a-z_]\w*\.)*[A-Z][A-Za-z0-9]*[a-z]\w*: ")


def _first_error_line(output: str) -> str:
    """The last exception line of a traceback (``pkg.mod.SomeError: message``)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line):
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SMDEBUG_CONFIG_FILE_PATH=str(work / "debughookconfig.json"),
        PYTHONPATH=str(work),
        OMP_NUM_THREADS="1",
        TF_NUM_INTRAOP_THREADS="1",
        TF_NUM_INTEROP_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        CUDA_VISIBLE_DEVICES="",
    )
    env.pop("SM_TRAINING_ENV", None)
    return env


def run_program(prog: Program, source: ExampleSource, python: str, keep: bool) -> tuple[str, str]:
    """('PASS'|'FAIL'|'SKIP', detail)."""
    texts = {}
    for dest, rel in prog.files.items():
        text = source.read(rel)
        if text is None:
            return "SKIP", f"{rel} is not in this copy"
        texts[dest] = text
    work = Path(tempfile.mkdtemp(prefix="published-example-"))
    try:
        for dest, text in texts.items():
            (work / dest).write_text(text, encoding="utf-8")
        (work / "_published_prelude.py").write_text(PRELUDE, encoding="utf-8")
        if prog.hook_config is not None:
            config = {"LocalPath": str(work / "trial"), **prog.hook_config}
            (work / "debughookconfig.json").write_text(json.dumps(config), encoding="utf-8")
        for i, phase in enumerate(prog.phases, start=1):
            cmd = [python, *phase.launcher]
            if phase.code:
                driver = work / f"_phase{i}.py"
                driver.write_text("from _published_prelude import *\n" + phase.code, "utf-8")
                cmd.append(str(driver))
            try:
                done = subprocess.run(
                    cmd,
                    cwd=work,
                    env=_env(work),
                    capture_output=True,
                    text=True,
                    timeout=PHASE_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return "FAIL", f"phase {i}: timed out after {PHASE_TIMEOUT_S}s"
            if done.returncode not in phase.ok_codes:
                is_rule = phase.launcher[:2] == ("-m", "smdebug_lite.rule_runner")
                what = "rule job" if is_rule else "driver"
                detail = _first_error_line(done.stderr + "\n" + done.stdout)
                return "FAIL", f"phase {i} ({what}, exit {done.returncode}): {detail}"
            if phase.expect_output and phase.expect_output not in done.stdout + done.stderr:
                return "FAIL", f"phase {i}: its output lacks {phase.expect_output!r}"
        return "PASS", ""
    finally:
        if keep:
            print(f"    kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="amazon-sagemaker-examples: git dir or checkout")
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter whose `import smdebug` is checked"
    )
    parser.add_argument(
        "--only", nargs="*", default=(), help="run programs whose name contains one of these"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    args = parser.parse_args(argv)
    if not args.src.is_dir():
        parser.error(f"{args.src}: not a directory (expected a git dir or a checkout)")
    source = ExampleSource(args.src)
    passed = failed = 0
    for prog in programs():
        if args.only and not any(o in prog.name for o in args.only):
            continue
        status, detail = run_program(prog, source, args.python, args.keep)
        passed += status == "PASS"
        failed += status == "FAIL"
        print(
            f"{status} [{prog.framework}] {prog.name}" + (f": {detail}" if detail else ""),
            flush=True,
        )
        if prog.note and status != "PASS":
            print(f"    note: {prog.note}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
