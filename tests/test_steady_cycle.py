"""The steady saving cycle (`smdebug_lite.hooks.steady_cycle`) writes exactly what the general
path writes: the same training script, disturbed in every way the cycle relies on, gives the
same files with the cycle as with the general path alone; and a plain run does take it."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch
from _pytorch_support import read_out_dir, seeded_without_hook  # noqa: F401  (a fixture)
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.hooks.step_machine import StepMachine

torch.set_num_threads(1)
pytestmark = pytest.mark.usefixtures("seeded_without_hook")


@pytest.fixture
def cycles(monkeypatch):
    """Counts saving steps started and ended by the cycle."""
    counts = {"begin": 0, "end": 0}
    begin, end = StepMachine._cycle_begin, StepMachine._cycle_end

    def counting_begin(self, cycle, module):
        done = begin(self, cycle, module)
        counts["begin"] += done
        return done

    def counting_end(self, cycle):
        done = end(self, cycle)
        counts["end"] += done
        return done

    monkeypatch.setattr(StepMachine, "_cycle_begin", counting_begin)
    monkeypatch.setattr(StepMachine, "_cycle_end", counting_end)
    return counts


class _Extra(nn.Module):
    def forward(self, x):
        return x * 2


_COLLECTIONS = ["weights", "biases", "gradients", "losses"]


def _run(out_dir, steps: int, interval: int, events=lambda hook, step, model, x, loss: None,
         collections=_COLLECTIONS, flush=lambda step: True) -> None:
    """A seeded training run whose `events` disturb it at chosen steps."""
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=list(collections))
    hook.get_collection("extras").include(r"^extra_output_\d+$")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for step in range(steps):
        x, y = torch.randn(6, 5), torch.randint(0, 3, (6,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        if events(hook, step, model, x, loss) != "no backward":
            loss.backward()
        opt.step()
        # The writer finishes each step before the next saving one (else a saving step cannot
        # reuse the record's buffers, and goes the general way: correct, but not what is tested).
        if flush(step) and hook.trial_writer is not None:
            hook.trial_writer.flush()
    hook.close()


def _same_files(a, b) -> None:
    got, want = read_out_dir(a), read_out_dir(b)
    assert sorted(got) == sorted(want)
    for key, data in want.items():
        other = got[key]
        assert (other.mode, other.mode_step) == (data.mode, data.mode_step), key
        assert sorted(other.tensors) == sorted(data.tensors), key
        for name, value in data.tensors.items():
            np.testing.assert_array_equal(other.tensors[name], value, err_msg=f"{name} at {key}")
            assert other.tensors[name].dtype == value.dtype


def _both_ways(tmp_path, monkeypatch, cycles, **kwargs) -> dict[str, int]:
    """Run with the cycle, then with the general path alone, and compare the files."""
    _run(tmp_path / "steady", **kwargs)
    taken = dict(cycles)
    with monkeypatch.context() as m:
        m.setattr(StepMachine, "_take_cycle", lambda self, *a: None)
        _run(tmp_path / "general", **kwargs)
    assert cycles == taken  # (the general run took no cycle)
    _same_files(tmp_path / "steady", tmp_path / "general")
    return taken


@pytest.mark.parametrize(("interval", "collections"), [
    (2, _COLLECTIONS), (3, _COLLECTIONS), (7, _COLLECTIONS),
    (3, ["weights", "gradients", "outputs"]),  # (module outputs: the model's own hooks too)
    (3, ["gradients"]),  # (nothing saved at the step's start)
])
def test_a_plain_run_takes_the_cycle_and_writes_what_the_general_path_writes(
        tmp_path, monkeypatch, cycles, interval, collections):
    taken = _both_ways(tmp_path, monkeypatch, cycles, steps=8 * interval + 2, interval=interval,
                       collections=collections)
    # The first saving steps are captured, recorded, then repeated by the general path; the
    # cycle carries out the others.
    assert taken["begin"] >= 4 and taken["end"] >= 4


def test_every_disturbance_of_the_cycle_gives_the_general_paths_files(tmp_path, monkeypatch, cycles):
    extra = _Extra()

    two_schedules: list[int] = []

    def events(hook, step, model, x, loss):
        # (each one comes once the cycle has been taken again: a saving step captured, one
        # repeated by the general path, one carried out by the cycle)
        if step == 0:
            two_schedules.clear()  # (a new run)
        elif step == 16:  # a quiet step
            hook.save_scalar("quiet", 1.5)
        elif step == 30:  # a saving step
            hook.save_scalar("lr", 0.2)
        elif step == 45:  # a second backward pass in a saving step
            (model[2](model[1](model[0](x))).sum() * 0.5).backward()
        elif step == 59:  # another mode for a while, from the step the cycle would save
            hook.set_mode(smd.modes.EVAL)
            for _ in range(4):
                model(x).sum().backward()  # (gradients are never saved in EVAL)
            hook.set_mode(smd.modes.TRAIN)
        elif step in (72, 80):  # another schedule for every collection, from the next step on
            # (72 is a saving step, and the step after it saves too)
            for name in hook.include_collections:
                cfg = hook.get_collection(name).save_config.get_save_config(smd.modes.TRAIN)
                cfg.save_interval = 1 if step == 72 else 4
        elif step == 92:  # a tensor computed outside modules, in a saving step
            hook.record_tensor_value("extra", extra(loss))
        elif step == 108:  # a parameter whose tensor is replaced
            with torch.no_grad():
                model[0].weight.data = torch.full_like(model[0].weight, 0.25)
        elif step == 124:  # a saving step without backward pass
            return "no backward"
        elif step == 140:  # a collection that saves more, from now on
            custom = hook.get_collection("custom")
            custom.include("Sequential_0.weight")
            custom.save_config = smd.SaveConfig(save_interval=4)
            hook.include_collections.append("custom")
            hook.prepare_collections()
        elif step == 156:  # set_step moves the counters
            hook.set_step(hook.step + 2)
        elif step >= 170 and not two_schedules and (hook.mode_step + 1) % 4 == 0:
            # Right before a saving step, collections come to save by two schedules: weights
            # at that step, the others not (the general path only, from now on).
            two_schedules.append(step)
            for name in hook.include_collections:
                if name != "weights":
                    cfg = hook.get_collection(name).save_config.get_save_config(smd.modes.TRAIN)
                    cfg.save_interval = 7
        return None

    taken = _both_ways(tmp_path, monkeypatch, cycles, steps=190, interval=3, events=events,
                       collections=_COLLECTIONS + ["extras"])
    assert taken["begin"] >= 20 and taken["end"] >= 20


def test_the_cycle_stops_where_no_collection_saves_again(tmp_path, monkeypatch, cycles):
    def events(hook, step, model, x, loss):
        if step == 20:
            cfg = hook.get_collection("weights").save_config.get_save_config(smd.modes.TRAIN)
            cfg.end_step = 27
        return None

    _both_ways(tmp_path, monkeypatch, cycles, steps=40, interval=3, events=events)


def test_a_saving_step_never_reuses_buffers_the_writer_has_not_written(tmp_path, monkeypatch, cycles):
    """The writer process is stopped from saving step 15 until step 18 has captured: step 18
    must not replay into the buffers step 15 still waits in."""

    def events(hook, step, model, x, loss):
        if step == 15:
            os.kill(hook.trial_writer.proc.popen.pid, signal.SIGSTOP)
        elif step == 18:
            os.kill(hook.trial_writer.proc.popen.pid, signal.SIGCONT)
        return None

    taken = _both_ways(tmp_path, monkeypatch, cycles, steps=30, interval=3, events=events,
                       flush=lambda step: not 15 <= step < 18)
    assert taken["begin"] >= 4
