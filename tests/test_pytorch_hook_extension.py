"""A Hook subclass that overrides smdebug's per-module methods gets them called, as in smdebug.

The training script below is a pruning-style subclass of the kind published for smdebug: its
`forward_hook` names modules through `module_maps`, registers `backward_hook(...)` callbacks on
module outputs, writes tensors of its own with `_write_outputs`, masks a layer's output, and
calls `super()`. It runs under smdebug-lite and under real smdebug 1.0.34 (reference venv): the
same overrides are called for the same modules and steps, and the same tensors are saved with
the same values.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.trials import create_trial

torch.set_num_threads(1)

# Runs under both libraries (`import smdebug` is smdebug-lite's alias in the project venv).
SCRIPT = r'''
import json, sys
import torch, torch.nn as nn
import smdebug.pytorch as smd
from smdebug.trials import create_trial

torch.manual_seed(0)
torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.relu(self.bn(self.fc1(x))))


class PruningHook(smd.Hook):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.grad_names, self.grad_calls, self.masks = [], [], 0, {}

    def name_of(self, module):
        # smdebug 1.0.34 lost `module_maps` (older releases and their examples had it) and
        # names modules by a `_module_name` attribute instead; smdebug-lite has both.
        maps = getattr(self, "module_maps", None)
        if maps is not None:
            assert module._module_name == maps[module]
            return maps[module]
        return module._module_name

    def forward_hook(self, module, inputs, outputs):
        name = self.name_of(module)
        self.calls.append([str(self.mode), self.step, name, type(module).__name__])
        if isinstance(module, nn.BatchNorm1d):
            self._write_outputs(name + ".running_mean", module.running_mean)
        if outputs.requires_grad:
            outputs.register_hook(self.backward_hook(name + "_output"))
        super().forward_hook(module, inputs, outputs)
        if name in self.masks:
            pruned = outputs * self.masks[name]
            self._write_outputs(name + "_pruned", pruned)
            self.last_saved_step = self.step
            return pruned

    def backward_hook(self, tname):
        self.grad_names.append(tname)
        inner = super().backward_hook(tname)

        def back(grad):
            self.grad_calls += 1
            return inner(grad)

        return back


out = sys.argv[1]
model = Net()
hook = PruningHook(out_dir=out, save_config=smd.SaveConfig(save_interval=3),
                   include_collections=["weights", "gradients", "losses", "custom"])
hook.get_collection("custom").include([r"fc1_output_\d+$", r"running_mean", r"_pruned_output_0$",
                                       r"relu_input_0$"])
hook.register_module(model)
loss_fn = nn.CrossEntropyLoss()
hook.register_loss(loss_fn)
hook.masks["fc1"] = (torch.arange(8) % 2 == 0).float()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook.set_mode(smd.modes.TRAIN)
for i in range(13):
    x = torch.randn(4, 6)
    y = torch.tensor([0, 1, 2, i % 3])
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
hook.set_mode(smd.modes.EVAL)
model.eval()
with torch.no_grad():
    for i in range(4):
        loss_fn(model(torch.randn(4, 6)), torch.tensor([0, 1, 2, 0]))
hook.close()

trial = create_trial(out)
saved = {}
for name in trial.tensor_names():
    t = trial.tensor(name)
    saved[name] = {str(s): t.value(s).astype("float64").ravel().tolist() for s in t.steps()}
print("@@RESULT@@" + json.dumps({"saved": saved, "calls": hook.calls, "grad_names": hook.grad_names,
                                 "grad_calls": hook.grad_calls}))
'''


def _result(proc: subprocess.CompletedProcess) -> dict:
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
    assert proc.returncode == 0 and marker, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(marker[0][len("@@RESULT@@"):])


def _run_ours(out: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, out], capture_output=True, text=True,
                          timeout=300)
    return _result(proc)


@pytest.mark.slow
def test_pruning_subclass_overrides_are_called(tmp_path):
    got = _run_ours(str(tmp_path / "ours"))
    modules = ["fc1", "bn", "relu", "fc2", "Net", "CrossEntropyLoss"]
    # forward_hook: every module of the model, then the loss, at every step of both modes.
    phases = (("TRAIN", range(13)), ("EVAL", range(13, 17)))
    expected = [[f"ModeKeys.{mode}", step, name] for mode, steps in phases
                for step in steps for name in modules]
    assert [c[:3] for c in got["calls"]] == expected
    assert {c[2]: c[3] for c in got["calls"]} == {
        "fc1": "Linear", "bn": "BatchNorm1d", "relu": "ReLU", "fc2": "Linear", "Net": "Net",
        "CrossEntropyLoss": "CrossEntropyLoss"}
    # backward_hook: once per parameter at registration, then once per module output and step.
    params = [f"Net_{m}.{p}" for m in ("fc1", "bn", "fc2") for p in ("weight", "bias")]
    assert got["grad_names"][:6] == params
    assert got["grad_names"][6:] == [f"{m}_output" for _ in range(13) for m in modules]
    assert got["grad_calls"] == 13 * (len(params) + len(modules))

    saved = got["saved"]
    train_steps = ["0", "3", "6", "9", "12"]
    for name in ("gradient/fc1_output", "gradient/Net_fc1.weight",
                 "gradient/CrossEntropyLoss_output"):
        assert sorted(saved[name], key=int) == train_steps, name  # (no gradients in EVAL)
    for name in ("fc1_output_0", "fc1_pruned_output_0", "bn.running_mean_output_0", "relu_input_0",
                 "Net_fc1.weight", "CrossEntropyLoss_output_0"):
        assert sorted(saved[name], key=int) == train_steps + ["13", "16"], name
    assert "fc1_input_0" not in saved  # (no collection selects it)
    for step in train_steps:  # the mask the override applied is what the model computed with
        pruned = np.asarray(saved["fc1_pruned_output_0"][step]).reshape(4, 8)
        raw = np.asarray(saved["fc1_output_0"][step]).reshape(4, 8)
        assert np.all(pruned[:, 1::2] == 0) and np.array_equal(pruned[:, ::2], raw[:, ::2])
        assert not np.all(raw[:, 1::2] == 0)
        # the gradient of fc1's output came through the mask: zero where it was pruned
        grad = np.asarray(saved["gradient/fc1_output"][step]).reshape(4, 8)
        assert np.all(grad[:, 1::2] == 0) and np.any(grad[:, ::2] != 0)


@pytest.mark.reference
def test_pruning_subclass_matches_smdebug(tmp_path):
    from _pytorch_support import ref_available
    from refvenv import run_ref

    ok, reason = ref_available()
    if not ok:
        pytest.skip(reason)
    ours = _run_ours(str(tmp_path / "ours"))
    ref = _result(run_ref(SCRIPT, str(tmp_path / "ref"), timeout=300))
    assert ours["calls"] == ref["calls"]
    assert ours["grad_names"] == ref["grad_names"]
    assert ours["grad_calls"] == ref["grad_calls"]
    assert sorted(ours["saved"]) == sorted(ref["saved"])
    for name, steps in ref["saved"].items():
        assert sorted(ours["saved"][name]) == sorted(steps), name
        for step, value in steps.items():
            np.testing.assert_allclose(ours["saved"][name][step], value, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{name} at step {step}")


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 5)
        self.fc2 = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _train(hook: smd.Hook, model: nn.Module, steps: int) -> None:
    loss_fn = nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(torch.randn(3, 4)), torch.zeros(3, 2)).backward()
        opt.step()
    hook.close()


@pytest.mark.parametrize("method", ["_save_for_tensor", "_write_raw_tensor_simple",
                                    "_write_for_tensor", "export_collections", "_log_params",
                                    "_make_numpy_array"])
def test_override_the_hook_never_calls_fails_at_construction(tmp_path, method):
    cls = type("Custom", (smd.Hook,), {method: lambda self, *a, **k: None})
    with pytest.raises(SMDebugTypeError, match=rf"Custom overrides {method} .*never calls"):
        cls(str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_plain_hook_dispatches_through_no_override(tmp_path):
    model = _MLP()
    hook = smd.Hook(str(tmp_path / "run"), include_collections=["weights", "gradients"])
    hook.register_module(model)
    assert hook.module_maps == {model: "_MLP", model.fc1: "fc1", model.fc2: "fc2"}
    # no forward hook on any module, no tensor hook on any parameter, no attribute set
    assert not model.fc1._forward_hooks and not model._forward_hooks
    assert all(not p._backward_hooks for p in model.parameters())
    assert not hasattr(model.fc1, "_module_name")
    hook.close()


def test_forward_pre_hook_fhook_and_worker_overrides(tmp_path):
    class Counting(smd.Hook):
        pre = fh = 0
        counted = None

        def forward_pre_hook(self, module, inputs):
            type(self).pre += 1
            super().forward_pre_hook(module, inputs)

        def fhook(self, module, inputs, outputs):
            type(self).fh += 1
            assert self.module_maps[module] == "_MLP"

        def _get_worker_name(self):
            return "worker_0"

        def count_parameters(self, model):
            type(self).counted = super().count_parameters(model)
            return type(self).counted

    out = tmp_path / "run"
    hook = Counting(str(out), save_config=smd.SaveConfig(save_interval=4),
                    include_collections=["weights"])
    _train(hook, _MLP(), 10)
    assert Counting.pre == 10 and Counting.fh == 10
    assert Counting.counted == 4 * 5 + 5 + 5 * 2 + 2
    assert create_trial(str(out)).steps() == [0, 4, 8]


def test_write_helpers_in_saving_steps_only(tmp_path):
    class Writing(smd.Hook):
        def forward_hook(self, module, inputs, outputs):
            if module is model.fc1:
                self._write_raw_tensor_simple("mask/fc1", torch.ones(5))
                self._save_for_tensor("fc1_activation_mean", outputs.mean().reshape(1))
                self._write_raw_tensor_simple("empty", torch.ones(0))

    model = _MLP()
    out = tmp_path / "run"
    hook = Writing(str(out), save_config=smd.SaveConfig(save_interval=3),
                   include_collections=["losses", "activations"])
    hook.get_collection("activations").include("activation")
    _train(hook, model, 7)
    trial = create_trial(str(out))
    assert trial.tensor("mask/fc1").steps() == [0, 3, 6]
    np.testing.assert_array_equal(trial.tensor("mask/fc1").value(3), np.ones(5, np.float32))
    assert trial.tensor("fc1_activation_mean").steps() == [0, 3, 6]
    assert "empty" not in trial.tensor_names()
    assert trial.tensor_names(collection="activations") == ["fc1_activation_mean"]
    for coll in ("losses", "activations"):  # (in no collection)
        assert "mask/fc1" not in trial.tensor_names(collection=coll)


def test_error_in_an_override_disables_the_hook_not_training(tmp_path, caplog):
    class Broken(smd.Hook):
        def forward_hook(self, module, inputs, outputs):
            raise KeyError("no such module")

    model = _MLP()
    hook = Broken(str(tmp_path / "run"), include_collections=["weights"])
    with caplog.at_level(logging.ERROR):
        _train(hook, model, 3)  # training goes on
    assert hook.disabled
    errors = [r for r in caplog.records if "forward_hook" in r.getMessage()]
    assert len(errors) == 1 and "KeyError" in errors[0].getMessage()
