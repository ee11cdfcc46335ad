"""`Hook.start_step` in real torch training loops: steps and modes land where the loop begins
them, numbered as asked; mixing with the automatic stepping of forward passes is what the
docstring says; bad arguments are refused by name. And scalars saved at saving steps keep a
run on the steady saving cycle, with the files the general path writes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pytorch_support import read_out_dir, seeded_without_hook  # noqa: F401  (a fixture)
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.exceptions import SMDebugTypeError, SMDebugValueError
from smdebug_lite.hooks.core import HookCore
from smdebug_lite.hooks.step_machine import StepMachine
from smdebug_lite.pytorch.hook import Hook
from smdebug_lite.trials import create_trial

torch.set_num_threads(1)
pytestmark = pytest.mark.usefixtures("seeded_without_hook")
TRAIN, EVAL = smd.modes.TRAIN, smd.modes.EVAL


def _model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))


def _hook(out_dir, interval: int = 1, collections=("weights", "gradients", "losses")) -> Hook:
    return smd.Hook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=list(collections))


def _train_step(model, opt, n_forward: int = 2) -> float:
    """One optimizer step over `n_forward` forward passes (gradient accumulation)."""
    opt.zero_grad()
    total = 0.0
    for _ in range(n_forward):
        loss = model(torch.randn(3, 4)).pow(2).mean()
        loss.backward()
        total += loss.item()
    opt.step()
    return total


def test_steps_and_modes_land_where_the_loop_begins_them(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hook(tmp_path / "run")
    hook.register_module(model, auto_step=False)
    model(torch.randn(3, 4))  # (before the first start_step: no step)
    weights, grads = [], []
    for _ in range(3):
        hook.start_step(mode=TRAIN)
        weights.append(model[0].weight.detach().clone())
        _train_step(model, opt, n_forward=2)  # two forward passes: one step
        grads.append(model[0].weight.grad.detach().clone())
        hook.save_scalar("lr", 0.1)
    for _ in range(2):
        hook.start_step(mode="eval")  # (a mode's name is accepted, as by set_mode)
        with torch.no_grad():
            model(torch.randn(3, 4))
    hook.close()

    trial = create_trial(str(tmp_path / "run"))
    assert trial.steps() == [0, 1, 2, 3, 4]
    assert trial.steps(mode=TRAIN) == [0, 1, 2] and trial.steps(mode=EVAL) == [0, 1]
    for s in range(3):
        np.testing.assert_array_equal(trial.tensor("Sequential_0.weight").value(s, mode=TRAIN),
                                      weights[s].numpy())
        # (the accumulated gradient of both backward passes)
        np.testing.assert_allclose(trial.tensor("gradient/Sequential_0.weight").value(s, mode=TRAIN),
                                   grads[s].numpy())
        assert trial.tensor("scalar/lr").value(s, mode=TRAIN).tolist() == [0.1]
    np.testing.assert_array_equal(trial.tensor("Sequential_0.weight").value(1, mode=EVAL),
                                  model[0].weight.detach().numpy())
    assert "gradient/Sequential_0.weight" not in trial.tensor_names(step=3)


def test_numbered_steps_skip_ahead_in_the_mode_too(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hook(tmp_path / "run", interval=5)
    hook.register_module(model, auto_step=False)
    numbers = [0, 1, 7, 10, 11, 15]
    for n in numbers:
        hook.start_step(step=n, mode=TRAIN)
        assert (hook.step, hook.mode_step) == (n, n)
        _train_step(model, opt, n_forward=1)
    hook.start_step()  # the next one
    assert (hook.step, hook.mode_step) == (16, 16)
    # another mode: its own count (none so far) moves by as many steps, 17 to 22
    hook.start_step(step=22, mode=EVAL)
    assert (hook.step, hook.mode_step, hook.mode_steps[TRAIN]) == (22, 5, 16)
    hook.close()
    trial = create_trial(str(tmp_path / "run"))
    # the schedule (every 5th) counts the numbers given: 7 and 11 are no saving steps
    assert trial.steps(mode=TRAIN) == [0, 10, 15]
    assert trial.steps(mode=EVAL) == [5] and trial.steps() == [0, 10, 15, 22]


def test_the_first_start_step_ends_the_stepping_of_forward_passes(tmp_path):
    model, late = _model(), nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hook(tmp_path / "run")
    hook.register_module(model)
    hook.set_mode(TRAIN)
    for _ in range(2):  # automatic: each forward pass is a step
        _train_step(model, opt, n_forward=1)
    assert hook.step == 1 and "_compiled_call_impl" in vars(model)  # (its step call)
    hook.start_step()
    assert hook.step == 2 and "_compiled_call_impl" not in vars(model)
    assert not model._forward_pre_hooks  # the step pre-hook is off the model
    _train_step(model, opt, n_forward=3)  # forward passes after it belong to the step it began
    assert hook.step == 2
    hook.register_module(late)  # registered after: no step pre-hook either
    late(torch.randn(1, 2))
    assert hook.step == 2 and not late._forward_pre_hooks
    hook.start_step()
    _train_step(model, opt, n_forward=1)
    assert hook.step == 3
    hook.close()
    assert create_trial(str(tmp_path / "run")).steps(mode=TRAIN) == [0, 1, 2, 3]


def test_start_step_after_close_does_nothing(tmp_path):
    hook = _hook(tmp_path / "run")
    hook.register_module(_model(), auto_step=False)
    hook.start_step(mode=TRAIN)
    hook.close()
    hook.start_step(mode=TRAIN)  # (no error, nothing written)
    assert create_trial(str(tmp_path / "run")).steps() == [0]


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"step": "3"}, SMDebugTypeError, r"start_step: step='3' \(str\) must be an int or None"),
    ({"step": 2.0}, SMDebugTypeError, r"start_step: step=2.0 \(float\) must be an int"),
    ({"step": True}, SMDebugTypeError, r"start_step: step=True \(bool\) must be an int"),
    ({"step": 1}, SMDebugValueError, r"step=1 must be greater than the current step 1"),
    ({"step": 0}, SMDebugValueError, r"step=0 must be greater than the current step 1"),
    ({"mode": "TRAINING"}, SMDebugValueError, r"start_step: mode='TRAINING' is not a mode"),
    ({"mode": 7}, SMDebugValueError, r"start_step: mode=7 is not a mode"),
])
def test_bad_arguments_are_refused_by_name(tmp_path, kwargs, error, message):
    hook = _hook(tmp_path / "run")
    hook.register_module(_model(), auto_step=False)
    hook.start_step()
    hook.start_step(step=np.int64(1))  # (numpy integers are ints)
    with pytest.raises(error, match=message):
        hook.start_step(**kwargs)
    assert hook.step == 1 and not hook.disabled  # nothing moved; the hook goes on
    hook.close()


def test_register_module_refuses_a_non_bool_auto_step(tmp_path):
    hook = _hook(tmp_path / "run")
    with pytest.raises(SMDebugTypeError, match="register_module: auto_step='no' must be True or False"):
        hook.register_module(_model(), auto_step="no")
    hook.close()


def _scalar_run(out_dir, steps: int = 40, interval: int = 4) -> None:
    """A loop that begins its steps and saves a loss and two scalars at each saving step."""
    torch.manual_seed(5)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hook(out_dir, interval=interval)
    hook.register_module(model, auto_step=False)
    for step in range(steps):
        hook.start_step(mode=TRAIN)
        if hook.saving_this_step:
            hook.save_scalar("lr", 0.1 / (1 + step))
        loss = model(torch.randn(3, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if hook.saving_this_step:
            hook.record_tensor_value("loss", loss.detach())
            hook.save_scalar("train_loss", loss.item())
        if hook.trial_writer is not None:  # (see test_steady_cycle: the writer keeps up)
            hook.trial_writer.flush()
    hook.close()


def test_scalars_at_saving_steps_keep_the_steady_cycle(tmp_path, monkeypatch):
    taken = {"begin": 0}
    begin = StepMachine._cycle_begin

    def counting_begin(self, cycle, roots):
        done = begin(self, cycle, roots)
        taken["begin"] += done
        return done

    monkeypatch.setattr(StepMachine, "_cycle_begin", counting_begin)
    _scalar_run(tmp_path / "steady")
    assert taken["begin"] >= 5
    with monkeypatch.context() as m:  # scalars written as the hook core writes them
        m.setattr(Hook, "save_scalar", HookCore.save_scalar)
        m.setattr(StepMachine, "_take_cycle", lambda self, *a: None)
        _scalar_run(tmp_path / "general")
    got, want = read_out_dir(tmp_path / "steady"), read_out_dir(tmp_path / "general")
    assert sorted(got) == sorted(want) and len(want) == 10
    for key, data in want.items():
        assert (got[key].mode, got[key].mode_step) == (data.mode, data.mode_step)
        assert sorted(got[key].tensors) == sorted(data.tensors), key
        for name, value in data.tensors.items():
            np.testing.assert_array_equal(got[key].tensors[name], value, err_msg=f"{name} at {key}")
            assert got[key].tensors[name].dtype == value.dtype
