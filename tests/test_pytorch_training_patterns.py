"""The PyTorch hook inside the training loops people actually write: gradient clipping, gradients
zeroed in place, mixed precision (autocast, GradScaler), activation checkpointing.

Each loop runs long enough for the steady saving cycle (step records replayed, see
`steady_cycle`) to carry most saving steps, and every saved value is compared with one the test
captured itself with plain torch at the point the docs name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pytorch_support import (
    MLP,
    Recorder,
    read_out_dir,
    seeded_without_hook,  # noqa: F401  (a fixture, see pytestmark)
)
from torch import nn
from torch.utils.checkpoint import checkpoint

import smdebug_lite.pytorch as smd

torch.set_num_threads(1)
pytestmark = pytest.mark.usefixtures("seeded_without_hook")

STEPS = 12
INTERVAL = 2
W = ["MLP_fc1.weight", "MLP_fc1.bias", "MLP_fc2.weight", "MLP_fc2.bias"]
G = ["gradient/" + n for n in W]
LOSS = "CrossEntropyLoss_output_0"


def _batches(steps: int = STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)) for _ in range(steps)]


def _hooked(tmp_path, model: nn.Module, loss_fn: nn.Module,
            include_collections=("weights", "biases", "gradients", "losses"), **kwargs) -> smd.Hook:
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=INTERVAL),
                    include_collections=list(include_collections), **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook


def _assert_saved(tmp_path, expected: dict[int, dict[str, np.ndarray]]) -> dict:
    """Every saving step wrote exactly what the test recorded for it."""
    data = read_out_dir(tmp_path / "run")
    assert sorted(s for _, s in data) == list(range(0, STEPS, INTERVAL))
    for step, values in expected.items():
        if step % INTERVAL:
            continue
        saved = data[("worker_0", step)].tensors
        assert set(values) <= set(saved), (step, set(values) - set(saved))
        for name, value in values.items():
            assert saved[name].dtype == value.dtype, (step, name)
            np.testing.assert_array_equal(saved[name], value, err_msg=f"step {step} {name}")
    return data


def test_gradients_are_saved_as_backward_left_them_before_clipping(tmp_path):
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hook = _hooked(tmp_path, model, loss_fn)
    rec = Recorder(model, "MLP")
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        rec.grads(step)
        rec.put(step, LOSS, loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e-3)
        clipped = model.fc1.weight.grad.numpy()
        assert not np.allclose(clipped, rec.values[step][G[0]])  # the clip did change them
        opt.step()
    hook.close()
    _assert_saved(tmp_path, rec.values)


def test_gradients_zeroed_in_place_are_saved_at_each_saving_step(tmp_path):
    """``zero_grad(set_to_none=False)`` keeps the same gradient tensors for the whole run."""
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    hook = _hooked(tmp_path, model, loss_fn)
    rec = Recorder(model, "MLP")
    grad_tensors = None
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        if grad_tensors is None:
            grad_tensors = [p.grad for p in model.parameters()]
        assert all(p.grad is g for p, g in zip(model.parameters(), grad_tensors, strict=True))
        rec.grads(step)
        rec.put(step, LOSS, loss)
        opt.step()
    hook.close()
    _assert_saved(tmp_path, rec.values)


def test_cpu_autocast_saves_low_precision_outputs_exactly(tmp_path):
    """Under ``torch.autocast`` a Linear's output is bfloat16 while parameters, their gradients
    and the loss stay float32. The bfloat16 output is stored as float32 (every bfloat16 value is
    one; smdebug 1.0.34 cannot read BFLOAT16), exactly."""
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hooked(tmp_path, model, loss_fn, include_regex=["fc1_output_0"])
    outputs: list[torch.Tensor] = []
    model.fc1.register_forward_hook(lambda m, i, o: outputs.append(o.detach().clone()))
    rec = Recorder(model, "MLP")
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        out = outputs[-1]
        assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
        rec.grads(step)
        rec.put(step, LOSS, loss)
        rec.put(step, "fc1_output_0", out.float())
        opt.step()
    hook.close()
    _assert_saved(tmp_path, rec.values)


def test_grad_scaler_gradients_are_saved_scaled_as_backward_produced_them(tmp_path):
    """With ``torch.amp.GradScaler`` the backward pass produces the gradients of the scaled loss;
    those are saved (as smdebug saved them), not the ones ``unscale_`` leaves. The loss is saved
    unscaled: it is the loss module's output."""
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    hook = _hooked(tmp_path, model, loss_fn)
    rec = Recorder(model, "MLP")
    scales = {}
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scales[step] = scaler.get_scale()
        rec.grads(step)
        rec.put(step, LOSS, loss)
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    hook.close()
    data = _assert_saved(tmp_path, rec.values)
    assert len(set(scales.values())) > 1  # the scale grew during the run: each step has its own
    saved = data[("worker_0", 2)].tensors[G[0]]
    unscaled = rec.values[2][G[0]] / scales[2]
    np.testing.assert_allclose(saved / scales[2], unscaled, rtol=1e-6)


class _Blocks(nn.Module):
    """An MLP whose first block is recomputed in the backward pass (activation checkpointing)."""

    def __init__(self, use_reentrant: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)
        self.use_reentrant = use_reentrant

    def forward(self, x):
        if self.use_reentrant:
            x = x.detach().requires_grad_()  # (the reentrant variant needs an input that does)
        h = checkpoint(lambda t: self.relu(self.fc1(t)), x, use_reentrant=self.use_reentrant)
        return self.fc2(h)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_activation_checkpointing_saves_each_output_once(tmp_path, use_reentrant):
    """The backward pass runs the checkpointed block's forward again; that recomputation is
    not another call of the module: its outputs are not saved again (as ``fc1_output_1``), and
    the values saved are those of the step's forward pass."""
    model, loss_fn = _Blocks(use_reentrant), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hooked(tmp_path, model, loss_fn, include_collections=["gradients", "losses"],
                   include_regex=[r"fc1_output_\d+", r"relu_input_\d+"])
    calls: list[torch.Tensor] = []
    model.fc1.register_forward_hook(lambda m, i, o: calls.append(o.detach().clone()))
    rec = Recorder(model, "_Blocks")
    for step, (x, y) in enumerate(_batches()):
        calls.clear()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        first = calls[0]
        loss.backward()
        assert len(calls) == 2  # the recomputation ran fc1 again
        rec.put(step, "fc1_output_0", first)
        rec.put(step, "relu_input_0", first)
        rec.put(step, LOSS, loss)
        rec.grads(step)
        opt.step()
    hook.close()
    data = _assert_saved(tmp_path, rec.values)
    for (_, step), d in data.items():
        assert not any(n.endswith("_1") for n in d.tensors), (step, sorted(d.tensors))
    assert hook.step == STEPS - 1  # the recomputation did not count as a step either


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_checkpointed_registered_model_counts_one_step_per_forward_pass(tmp_path, use_reentrant):
    """The registered model itself under ``checkpoint``: its forward runs again in the backward
    pass, which is not a new step."""
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = _hooked(tmp_path, model, loss_fn)
    rec = Recorder(model, "MLP")
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad()
        x.requires_grad_(use_reentrant)  # (the reentrant variant needs an input that does)
        loss = loss_fn(checkpoint(model, x, use_reentrant=use_reentrant), y)
        loss.backward()
        rec.grads(step)
        rec.put(step, LOSS, loss)
        opt.step()
    assert hook.step == STEPS - 1
    hook.close()
    _assert_saved(tmp_path, rec.values)


def test_evaluation_under_inference_mode(tmp_path):
    """An EVAL loop under ``torch.inference_mode()`` (tensors that cannot be saved for backward
    or changed outside it) saves its parameters, module outputs and losses like any other."""
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    hook = _hooked(tmp_path, model, loss_fn, include_regex=["fc2_output_0"])
    outputs: list[torch.Tensor] = []
    model.fc2.register_forward_hook(lambda m, i, o: outputs.append(o.clone()))
    hook.set_mode(smd.modes.EVAL)
    model.eval()
    rec = Recorder(model, "MLP")
    with torch.inference_mode():
        for step, (x, y) in enumerate(_batches()):
            rec.params(step)
            loss = loss_fn(model(x), y)
            assert loss.is_inference()
            rec.put(step, "fc2_output_0", outputs[-1])
            rec.put(step, LOSS, loss)
    hook.close()
    data = _assert_saved(tmp_path, rec.values)
    assert {d.mode for d in data.values()} == {"EVAL"}


class _KeywordClassifier(nn.Module):
    """A model shaped like Hugging Face's: keyword inputs, its loss computed inside by a loss
    submodule, a dict out."""

    def __init__(self) -> None:
        super().__init__()
        self.body = MLP()
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, *, inputs: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        logits = self.body(inputs)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss_fct(logits, labels)
        return out


def test_keyword_inputs_dict_outputs_and_a_loss_computed_inside_the_model(tmp_path):
    """``model(inputs=..., labels=...)`` is a step like any other forward pass; the loss
    submodule registered with `register_loss` saves under its class name, and a module inside
    the model saves its outputs by the regex."""
    model = _KeywordClassifier()
    hook = _hooked(tmp_path, model, model.loss_fct, include_regex=["body.fc2_output_0"])
    outputs: list[torch.Tensor] = []
    model.body.fc2.register_forward_hook(lambda m, i, o: outputs.append(o.detach().clone()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = Recorder(model, "_KeywordClassifier")
    for step, (x, y) in enumerate(_batches()):
        rec.params(step)
        opt.zero_grad()
        out = model(inputs=x, labels=y)
        out["loss"].backward()
        rec.grads(step)
        rec.put(step, LOSS, out["loss"])
        rec.put(step, "body.fc2_output_0", outputs[-1])
        opt.step()
    assert hook.step == STEPS - 1
    hook.close()
    data = _assert_saved(tmp_path, rec.values)
    assert "gradient/_KeywordClassifier_body.fc1.weight" in data[("worker_0", 0)].tensors
