"""Saving steps replayed from the last one (`smdebug_lite.pytorch.step_record`): each replayed
step writes its own values, and anything that differs from the record ends the replay without
losing or mixing up a tensor."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from _pytorch_support import read_out_dir, seeded_without_hook  # noqa: F401  (a fixture)
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.pytorch.capture import StepBuffer
from smdebug_lite.pytorch.step_record import StepRecord

torch.set_num_threads(1)

LOSS = "CrossEntropyLoss_output_0"


pytestmark = pytest.mark.usefixtures("seeded_without_hook")


@pytest.fixture
def replays(monkeypatch):
    """Counts replays handed over whole ("done") and replays ended early ("aborted")."""
    counts = {"done": 0, "aborted": 0}
    end, abort = StepBuffer.end_replay, StepBuffer.abort_replay

    def counting_end(self):
        counts["done"] += 1
        end(self)

    def counting_abort(self):
        if self._replay is not None:
            counts["aborted"] += 1
        abort(self)

    monkeypatch.setattr(StepBuffer, "end_replay", counting_end)
    monkeypatch.setattr(StepBuffer, "abort_replay", counting_abort)
    return counts


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))


def _hook(tmp_path, interval=2, **kwargs) -> smd.Hook:
    return smd.Hook(out_dir=str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=["weights", "biases", "gradients", "losses"], **kwargs)


def _require_writer_process(hook: smd.Hook) -> None:
    if not hasattr(hook.trial_writer, "proc"):
        pytest.skip("no writer process on this platform")


def _train(hook, model, steps, interval=2, before_backward=None, after_backward=None,
           backward=lambda step: True):
    """Train `steps` steps; returns what each saved step must hold, captured independently.
    The writer is flushed after each saved step, so that the record is free at the next one."""
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    expected: dict[int, dict[str, np.ndarray]] = {}
    for step in range(steps):
        saved = step % interval == 0
        x, y = torch.randn(6, 5), torch.randint(0, 3, (6,))
        opt.zero_grad()
        if saved:
            expected[step] = {f"Sequential_{n}": p.detach().clone().numpy()
                              for n, p in model.named_parameters()}
        if step == 2:
            _require_writer_process(hook)
        loss = loss_fn(model(x), y)
        if before_backward is not None:
            before_backward(step, model, loss)
        if backward(step):
            loss.backward()
            if after_backward is not None:
                after_backward(step, model, x)
        if saved:
            expected[step][LOSS] = loss.detach().numpy().copy()
            expected[step].update({f"gradient/Sequential_{n}": p.grad.clone().numpy()
                                   for n, p in model.named_parameters() if p.grad is not None})
        opt.step()
        if not saved:
            hook.trial_writer.flush()
    hook.close()
    return expected


def _check(tmp_path, expected):
    out = read_out_dir(tmp_path / "run")
    for step, tensors in expected.items():
        got = out[("worker_0", step)].tensors
        assert sorted(got) == sorted(tensors), step
        for name, value in tensors.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} at step {step}")
            assert got[name].dtype == value.dtype, name


def test_saving_steps_like_the_last_one_are_replayed_with_their_own_values(tmp_path, replays):
    expected = _train(_hook(tmp_path), _model(), steps=16)
    _check(tmp_path, expected)
    # Steps 0 and 2 are captured in private memory, 4 in shared memory (and recorded); 6 to 14
    # replay it.
    assert replays["done"] == 5 and replays["aborted"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64,
                                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_one_element_values_replayed_keep_their_dtype_and_exact_value(tmp_path, replays, dtype,
                                                                       shape):
    """A loss or metric recorded at each saving step (stored by its number when replayed), in
    every dtype whose snapshots are pooled (the others are never replayed)."""
    hook = _hook(tmp_path)
    values = {}

    def record(step, model, loss):
        if step % 2 == 0:
            # (a floating-point one is in the autograd graph, as a loss is)
            v = (loss * (step + 1) * 1000.123).reshape(shape).to(dtype)
            value = v.detach().numpy().copy()
            # (int8 and int16 are stored widened to int32, as the event files are read here)
            widened = value.dtype in (np.int8, np.int16)
            values[step] = value.astype(np.int32) if widened else value
            hook.record_tensor_value("loss", v)  # (the `losses` collection saves it)

    expected = _train(hook, _model(), steps=16, before_backward=record)
    for step, value in values.items():
        expected[step]["loss_output_0"] = value
    _check(tmp_path, expected)
    assert replays["done"] == 5 and replays["aborted"] == 0


def test_a_scalar_saved_in_a_replayed_step_is_written_with_all_of_its_tensors(tmp_path, replays):
    hook = _hook(tmp_path)

    def scalar(step, model, loss):
        if step == 8:
            hook.save_scalar("lr", 0.3)

    expected = _train(hook, _model(), steps=14, before_backward=scalar)
    out = read_out_dir(tmp_path / "run")
    np.testing.assert_allclose(out[("worker_0", 8)].tensors.pop("scalar/lr"), 0.3)
    expected[8]["scalar/lr"] = np.asarray(out[("worker_0", 8)].tensors.get("scalar/lr", 0.3))
    del expected[8]["scalar/lr"]
    for step, tensors in expected.items():
        got = out[("worker_0", step)].tensors
        got.pop("scalar/lr", None)
        assert sorted(got) == sorted(tensors), step
        for name, value in tensors.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} at step {step}")
    # 6 replayed; 8 ended its replay (the scalar) and went in full, recorded with the scalar;
    # 10 (no scalar) ended that replay and was recorded again; 12 replayed
    assert replays == {"done": 2, "aborted": 2}


def test_a_second_backward_pass_in_a_replayed_step_saves_the_accumulated_gradient(tmp_path, replays):
    def second_pass(step, model, x):
        if step == 8:  # (through the layers: a forward pass of the model itself is a new step)
            (model[2](model[1](model[0](x))).sum() * 0.5).backward()

    expected = _train(_hook(tmp_path), _model(), steps=14, after_backward=second_pass)
    _check(tmp_path, expected)
    assert replays == {"done": 2, "aborted": 1}


def test_a_replayed_step_without_backward_pass_saves_what_it_captured(tmp_path, replays):
    expected = _train(_hook(tmp_path), _model(), steps=10, backward=lambda step: step != 8)
    assert not any(name.startswith("gradient/") for name in expected[8])
    _check(tmp_path, expected)
    assert replays == {"done": 1, "aborted": 1}


def test_parameters_changed_in_place_or_in_dtype_are_saved_as_they_are(tmp_path, replays):
    """`p.data = ...` keeps the Parameter but changes its tensor; `model.double()` changes its
    dtype: a replay must copy the new values, and must not write a float64 into float32."""
    model = _model()

    def change(step, model, loss):
        if step == 7:
            with torch.no_grad():
                model[0].weight.data = torch.full_like(model[0].weight, 0.25)

    expected = _train(_hook(tmp_path), model, steps=12, before_backward=change)
    _check(tmp_path, expected)
    assert replays["done"] >= 3

    model.double()
    hook = smd.Hook(out_dir=str(tmp_path / "double" / "run"), save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights"])
    hook.register_module(model)
    for step in range(8):
        if step == 6:
            model.float()
        model(torch.randn(6, 5, dtype=next(model.parameters()).dtype))
        if step % 2:
            hook.trial_writer.flush()
    hook.close()
    got = read_out_dir(tmp_path / "double" / "run")
    assert got[("worker_0", 4)].tensors["Sequential_0.weight"].dtype == np.float64
    assert got[("worker_0", 6)].tensors["Sequential_0.weight"].dtype == np.float32
    np.testing.assert_array_equal(got[("worker_0", 6)].tensors["Sequential_0.weight"],
                                  model[0].weight.detach().numpy())


def test_a_record_gives_its_buffers_back_once_and_only_when_written():
    given: list[list] = []
    lock = threading.Lock()

    def record():
        return StepRecord([], [], ["a", "b", "c"], given.append, lock)

    rec = record()
    rec.used_by(1)
    rec.used_by(2)  # a replayed step before the first was acknowledged
    rec.drop()
    assert given == []  # both steps still being written
    rec.written()
    assert given == []
    rec.written()
    assert given == [["a", "b", "c"]]
    rec.drop()
    assert len(given) == 1

    given.clear()
    rec = record()
    rec.used_by(1)
    rec.written()
    rec.drop()  # written already: back at once
    assert given == [["a", "b", "c"]]

    given.clear()
    rec = record()
    rec.used_by(1)
    assert rec.hand_over(2) == ["a", "b"]  # the step being captured keeps these
    assert given == [["c"]]
    rec.written()  # the acknowledgement of an earlier use comes late: gives nothing back twice
    rec.drop()
    assert given == [["c"]]
