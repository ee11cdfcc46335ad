"""The PyTorch hook on real training loops: names, steps, save configs, reductions, modes."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from _pytorch_support import (
    MLP,
    REPO,
    Recorder,
    SmallCNN,
    read_out_dir,
    seeded_without_hook,  # noqa: F401  (a fixture, see pytestmark)
    steps_of,
    train_loop,
    value_at,
)
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.config.collection import CollectionKeys

torch.set_num_threads(1)

W = ["MLP_fc1.weight", "MLP_fc1.bias", "MLP_fc2.weight", "MLP_fc2.bias"]
G = ["gradient/" + n for n in W]
LOSS = "CrossEntropyLoss_output_0"


pytestmark = pytest.mark.usefixtures("seeded_without_hook")


class LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int = logging.WARNING) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= level]


@pytest.fixture
def logs():
    handler = LogCapture()
    root = logging.getLogger("smdebug_lite")
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


def _run(tmp_path, *, train_steps=6, eval_steps=3, model=None, **hook_kwargs):
    model = model or MLP()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), **hook_kwargs)
    rec = Recorder(model, type(model).__name__)
    train_loop(model, hook, rec, train_steps=train_steps, eval_steps=eval_steps)
    hook.close()
    return read_out_dir(out), rec, hook


def test_every_step_values_match_independent_capture(tmp_path):
    data, rec, _ = _run(tmp_path, save_config=smd.SaveConfig(save_interval=1),
                        include_collections=["weights", "biases", "gradients", "losses"])
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == list(range(6))
    assert steps_of(data, "MLP_fc1.weight", "EVAL") == list(range(3))
    # Global steps continue across modes: TRAIN 0-5 are global 0-5, EVAL 0-2 are global 6-8.
    assert steps_of(data, "MLP_fc1.weight") == list(range(9))
    assert steps_of(data, "gradient/MLP_fc1.weight", "EVAL") == []  # never in EVAL
    for (mode, step), expected in rec.values.items():
        for name, value in expected.items():
            got = value_at(data, name, mode, step)
            assert got.dtype == value.dtype and got.shape == value.shape, name
            np.testing.assert_array_equal(got, value, err_msg=f"{mode} {step} {name}")
    saved = set().union(*(d.tensors for d in data.values()))
    assert saved == set(W + G + [LOSS])
    # Each event carries its mode and mode step.
    assert all(d.event_modes == {({"TRAIN": 1, "EVAL": 2}[d.mode], d.mode_step)} for d in data.values())


SCHEDULES = [
    # (SaveConfig, expected TRAIN steps of 12, expected EVAL steps of 5)
    (smd.SaveConfig(save_interval=5), [0, 5, 10], [0]),
    (smd.SaveConfig(save_interval=3, start_step=4, end_step=10), [6, 9], []),
    (smd.SaveConfig(save_interval=4, end_step=9), [0, 4, 8], [0, 4]),
    (smd.SaveConfig(save_steps=[3, 7]), [0, 3, 7], [0, 3]),
    (smd.SaveConfig(mode_save_configs={smd.modes.TRAIN: smd.SaveConfigMode(save_interval=2),
                                       smd.modes.EVAL: smd.SaveConfigMode(save_interval=3)}),
     [0, 2, 4, 6, 8, 10], [0, 3]),
    (smd.SaveConfig(mode_save_configs={smd.modes.TRAIN: smd.SaveConfigMode(save_steps=[1, 11])}),
     [0, 1, 11], [0]),
    (smd.SaveConfigMode(save_interval=6), [0, 6], [0]),
]


@pytest.mark.parametrize("config,train,eval_", SCHEDULES)
def test_save_config_schedules(tmp_path, config, train, eval_):
    data, rec, _ = _run(tmp_path, train_steps=12, eval_steps=5, save_config=config,
                        include_collections=["weights", "gradients", "losses"])
    for name in ("MLP_fc1.weight", LOSS):
        assert steps_of(data, name, "TRAIN") == train, name
        assert steps_of(data, name, "EVAL") == eval_, name
    assert steps_of(data, "gradient/MLP_fc2.bias", "TRAIN") == train
    for step in train:
        np.testing.assert_array_equal(value_at(data, "MLP_fc1.weight", "TRAIN", step),
                                      rec.values[("TRAIN", step)]["MLP_fc1.weight"])


def test_per_collection_save_configs(tmp_path):
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=4),
                    include_collections=["weights", "gradients", "losses"])
    hook.get_collection("gradients").save_config = smd.SaveConfig(save_steps=[1, 2])
    hook.get_collection("losses").save_config = {smd.modes.TRAIN: smd.SaveConfigMode(save_interval=1)}
    train_loop(MLP(), hook, None, train_steps=9, eval_steps=5)
    hook.close()
    data = read_out_dir(out)
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == [0, 4, 8]
    # a collection SaveConfig is complete: its own interval (500) applies, not the hook's
    assert steps_of(data, "gradient/MLP_fc1.weight", "TRAIN") == [0, 1, 2]
    assert steps_of(data, LOSS, "TRAIN") == list(range(9))
    assert steps_of(data, LOSS, "EVAL") == [0, 4]  # EVAL inherits the hook's interval


def _np_reduction(x: np.ndarray, red: str, is_abs: bool) -> float:
    x = np.abs(x) if is_abs else x
    x = x.astype(np.float64).reshape(-1)
    return {
        "min": x.min, "max": x.max, "mean": x.mean, "sum": x.sum, "prod": x.prod,
        "variance": lambda: x.var(ddof=1), "std": lambda: x.std(ddof=1),
        "l1": lambda: np.abs(x).sum(), "l2": lambda: np.sqrt((x * x).sum()),
    }[red]()


REDUCTION_CONFIGS = [
    smd.ReductionConfig(reductions=["min", "max", "mean", "std", "variance", "sum", "prod"]),
    smd.ReductionConfig(abs_reductions=["min", "max", "mean"], norms=["l1", "l2"],
                        abs_norms=["l2"], save_raw_tensor=True),
    smd.ReductionConfig(norms=["l1"], save_shape=True),
]


@pytest.mark.parametrize("rc", REDUCTION_CONFIGS, ids=["reductions", "abs+norms+raw", "shape"])
def test_reduction_configs(tmp_path, rc):
    data, rec, _ = _run(tmp_path, train_steps=3, eval_steps=1, reduction_config=rc,
                        save_config=smd.SaveConfig(save_interval=1),
                        include_collections=["weights", "biases", "gradients", "losses"])
    pairs = rc.iter_reductions()
    for (mode, step), expected in rec.values.items():
        d = next(v for v in data.values() if v.mode == mode and v.mode_step == step)
        for name, value in expected.items():
            if name == LOSS:  # scalar collections are never reduced, always raw
                np.testing.assert_array_equal(d.tensors[name], value)
                assert not any(k.startswith("smdebug/reductions/") and k.endswith(name) for k in d.tensors)
                continue
            assert (name in d.tensors) == rc.save_raw_tensor
            if rc.save_raw_tensor:
                np.testing.assert_array_equal(d.tensors[name], value)
            if rc.save_shape and not rc.save_raw_tensor:
                assert d.shapes[name] == value.shape
            for red, is_abs in pairs:
                rname = f"smdebug/reductions/{'abs_' if is_abs else ''}{red}/{name}"
                got = d.tensors[rname]
                assert got.shape == () and got.dtype == np.float32, rname
                np.testing.assert_allclose(float(got), _np_reduction(value, red, is_abs),
                                           rtol=2e-5, atol=1e-6, err_msg=rname)


def test_cnn_modules_io_regex_and_modes(tmp_path):
    model = SmallCNN()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=2),
                    include_regex=["conv1_output_0", r"relu_(input|output)_\d+", "SmallCNN_input_0"],
                    include_collections=["weights", "losses"])
    seen: dict[tuple[str, int], dict[str, np.ndarray]] = {}

    def spy(name):
        def fn(module, inputs, output):
            d = seen.setdefault((hook.mode.name, hook.mode_step), {})
            d[name + "_input_0"] = inputs[0].detach().clone().numpy()
            d[name + "_output_0"] = output.detach().clone().numpy()
        return fn

    model.conv1.register_forward_hook(spy("conv1"))
    model.relu.register_forward_hook(spy("relu"))
    train_loop(model, hook, None, train_steps=4, eval_steps=3, shape=(2, 1, 5, 5), n_classes=4)
    # Only the modules whose names the regexes can match got forward hooks (+ the spies).
    hooked = {n for n, m in model.named_modules() if m._forward_hooks}
    assert hooked == {"", "conv1", "relu"}
    assert len(model.relu._forward_hooks) == 2 and len(model.conv1._forward_hooks) == 2
    hook.close()
    assert {n for n, m in model.named_modules() if m._forward_hooks} == {"conv1", "relu"}
    data = read_out_dir(out)
    assert steps_of(data, "conv1_output_0", "TRAIN") == [0, 2]
    assert steps_of(data, "conv1_output_0", "EVAL") == [0, 2]
    names = set().union(*(d.tensors for d in data.values()))
    assert {"conv1_output_0", "relu_input_0", "relu_output_0", "SmallCNN_input_0",
            "SmallCNN_conv1.weight", "SmallCNN_bn.weight", "SmallCNN_fc.weight", LOSS} <= names
    assert "conv1_input_0" not in names and "fc_output_0" not in names
    assert not any(n.startswith("gradient/") for n in names)
    for mode, steps in (("TRAIN", [0, 2]), ("EVAL", [0, 2])):
        for step in steps:
            for name in ("conv1_output_0", "relu_input_0", "relu_output_0"):
                np.testing.assert_array_equal(value_at(data, name, mode, step),
                                              seen[(mode, step)][name], err_msg=name)


def test_module_outputs_match_and_repeated_calls_are_counted(tmp_path):
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.Tanh()

        def forward(self, x):
            return self.act(self.fc(self.act(x)))

    model = Twice()
    spied: list[dict[str, np.ndarray]] = []

    def spy(module, inputs, output):
        spied[-1].setdefault("act", []).append(output.detach().clone().numpy())

    model.act.register_forward_hook(spy)
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["outputs", "inputs"])
    hook.register_module(model)
    for _ in range(3):
        spied.append({})
        model(torch.randn(2, 4))
    hook.close()
    data = read_out_dir(out)
    assert set(data) == {("worker_0", s) for s in range(3)}
    for step in range(3):
        t = data[("worker_0", step)].tensors
        assert {"act_output_0", "act_output_1", "act_input_0", "act_input_1", "fc_input_0",
                "fc_output_0", "Twice_input_0", "Twice_output_0"} == set(t)
        np.testing.assert_array_equal(t["act_output_0"], spied[step]["act"][0])
        np.testing.assert_array_equal(t["act_output_1"], spied[step]["act"][1])
        np.testing.assert_array_equal(t["Twice_output_0"], spied[step]["act"][1])


def test_frozen_and_shared_parameters(tmp_path):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 4)
            self.frozen = nn.Linear(4, 4)
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.emb.weight  # shared
            for p in self.frozen.parameters():
                p.requires_grad_(False)

        def forward(self, idx):
            return self.head(self.frozen(self.emb(idx)))

    model = Tied()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients"])
    hook.register_module(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    grads = []
    for _ in range(2):
        opt.zero_grad()
        model(torch.tensor([0, 1, 2])).sum().backward()
        grads.append(model.emb.weight.grad.clone().numpy())
        opt.step()
    hook.close()
    data = read_out_dir(out)
    for step in range(2):
        t = data[("worker_0", step)].tensors
        assert set(t) == {"Tied_emb.weight", "Tied_frozen.weight", "Tied_frozen.bias",
                          "gradient/Tied_emb.weight"}
        np.testing.assert_array_equal(t["gradient/Tied_emb.weight"], grads[step])
    assert len(hook.handles) == 0  # close() detached everything


def test_gradient_accumulation_saves_the_accumulated_gradient(tmp_path):
    model = MLP()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["gradients"])
    hook.register_module(model)
    model.zero_grad()
    x = torch.randn(4, 6)
    model(x).sum().backward()
    (model.fc1(x).sum() * 2).backward()  # second backward in the same step
    expected = model.fc1.weight.grad.clone().numpy()
    hook.close()
    t = read_out_dir(out)[("worker_0", 0)].tensors
    np.testing.assert_array_equal(t["gradient/MLP_fc1.weight"], expected)


def test_remove_detaches_every_torch_hook(tmp_path):
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_all=True, save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss := nn.MSELoss())
    loss(model(torch.randn(2, 6)), torch.zeros(2, 3)).backward()
    assert len(hook.handles) == 4 + 4 + 1 + 1  # IO hooks on 4 modules, 4 params, loss, root pre
    hook.remove()
    assert hook.handles == []
    for m in list(model.modules()) + [loss]:
        assert not m._forward_hooks and not m._forward_pre_hooks
    assert all(not p._post_accumulate_grad_hooks for p in model.parameters())
    hook.close()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("order", ["register_then_compile", "compile_then_register"])
def test_torch_compile(tmp_path, backend, order):
    # Dynamo keeps the graphs it compiled for MLP.forward in earlier tests of this process and
    # does not guard on module hooks: start from none, as a training process does.
    torch._dynamo.reset()
    model = MLP()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients", "losses"],
                    include_regex=["fc1_output_0"])
    if order == "register_then_compile":
        hook.register_module(model)
        compiled = torch.compile(model, backend=backend)
    else:
        compiled = torch.compile(model, backend=backend)
        hook.register_module(compiled)
    loss_fn = nn.MSELoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = Recorder(model, "MLP")
    hook.set_mode(smd.modes.TRAIN)
    fc1_out = []
    model.fc1.register_forward_hook(lambda m, i, o: fc1_out.append(o.detach().clone().numpy()))
    for step in range(3):
        rec.params(("TRAIN", step))
        opt.zero_grad()
        loss = loss_fn(compiled(torch.randn(4, 6)), torch.zeros(4, 3))
        loss.backward()
        rec.grads(("TRAIN", step))
        rec.put(("TRAIN", step), "MSELoss_output_0", loss)
        opt.step()
    hook.close()
    data = read_out_dir(out)
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == [0, 1, 2]
    for (mode, step), expected in rec.values.items():
        for name, value in expected.items():
            np.testing.assert_array_equal(value_at(data, name, mode, step), value, err_msg=name)
    if fc1_out:  # compiled graphs may inline the spy; when it ran, values must agree
        np.testing.assert_allclose(value_at(data, "fc1_output_0", "TRAIN", 0), fc1_out[0], rtol=1e-6)
    assert steps_of(data, "fc1_output_0", "TRAIN") == [0, 1, 2]


def test_bfloat16_model(tmp_path):
    model = MLP().to(torch.bfloat16)
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients"],
                    reduction_config=smd.ReductionConfig(reductions=["mean"], save_raw_tensor=True))
    hook.register_module(model)
    model(torch.randn(3, 6, dtype=torch.bfloat16)).float().sum().backward()
    expected = model.fc1.weight.detach().float().numpy()
    grad = model.fc1.weight.grad.float().numpy()
    hook.close()
    t = read_out_dir(out)[("worker_0", 0)].tensors
    assert t["MLP_fc1.weight"].dtype == np.float32  # stored as float32, exactly
    np.testing.assert_array_equal(t["MLP_fc1.weight"], expected)
    np.testing.assert_array_equal(t["gradient/MLP_fc1.weight"], grad)
    mean = model.fc1.weight.detach().mean().float().item()
    assert float(t["smdebug/reductions/mean/MLP_fc1.weight"]) == mean
    import json
    idx = json.loads((out / "index/000000000/000000000000_worker_0.json").read_text())
    entry = next(e for e in idx["tensor_payload"] if e["tensorname"] == "MLP_fc1.weight")
    assert entry["orig_dtype"] == "bfloat16"


def test_save_scalar_lands_in_its_step_and_mode(tmp_path):
    out = tmp_path / "run"
    model = MLP()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=100),
                    include_collections=["weights"])
    hook.save_scalar("before_start", 1.5)
    hook.register_module(model)
    hook.set_mode(smd.modes.TRAIN)
    for i in range(3):
        model(torch.randn(2, 6))
        hook.save_scalar("train_metric", float(i))
    hook.set_mode(smd.modes.EVAL)
    model(torch.randn(2, 6))
    hook.save_scalar("eval_metric", 7)
    hook.close()
    data = read_out_dir(out)
    assert float(value_at(data, "scalar/before_start", "TRAIN", 0)[0]) == 1.5
    assert steps_of(data, "scalar/train_metric", "TRAIN") == [0, 1, 2]
    for i in range(3):
        v = value_at(data, "scalar/train_metric", "TRAIN", i)
        assert v.shape == (1,) and v.dtype == np.float64 and v[0] == i
    assert steps_of(data, "scalar/eval_metric", "EVAL") == [0]
    assert value_at(data, "scalar/eval_metric", "EVAL", 0).dtype == np.int64
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == [0]


def test_steps_between_saves_count_every_mode_and_keep_what_is_saved_in_them(tmp_path):
    """Steps between saves start in one go (counters only); a scalar saved in one of them, a
    mode switched in the middle of them, still land where they belong."""
    out = tmp_path / "run"
    model = MLP()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=10),
                    include_collections=["weights"])
    hook.register_module(model)
    hook.set_mode(smd.modes.TRAIN)
    x = torch.randn(2, 6)
    for i in range(14):
        hook.set_mode(hook.mode)  # (at every step, as some loops do: changes nothing)
        model(x)
        if i == 4:
            hook.save_scalar("mid", 4.0)
        if i == 12:
            hook.set_mode(smd.modes.EVAL)
    for _ in range(11):
        model(x)
    hook.set_mode(smd.modes.TRAIN)
    model(x)
    assert (hook.step, hook.mode_steps[smd.modes.TRAIN], hook.mode_steps[smd.modes.EVAL]) == (25, 13, 11)
    hook.close()
    data = read_out_dir(out)
    assert steps_of(data, "scalar/mid", "TRAIN") == [4]
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == [0, 10]
    assert steps_of(data, "MLP_fc1.weight", "EVAL") == [0, 10]
    assert sorted(step for _, step in data) == [0, 4, 10, 13, 23]  # global steps written


def test_losses_and_sm_metric_scalars_reach_sagemaker_metrics(tmp_path, monkeypatch):
    """On a training job, saved losses (their mean) and sm_metric scalars become SageMaker
    Metrics lines named <tensor>_<MODE>, numbered by the mode's step."""
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    monkeypatch.setenv("SAGEMAKER_METRICS_DIRECTORY", str(tmp_path / "metrics"))
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=2))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = {}
    for mode, steps in ((smd.modes.TRAIN, 4), (smd.modes.EVAL, 2)):
        hook.set_mode(mode)
        for i in range(steps):
            loss = loss_fn(model(torch.randn(8, 6)), torch.randint(0, 3, (8,)))
            losses[(mode.name, i)] = float(loss.detach())
            if mode is smd.modes.TRAIN:
                opt.zero_grad()
                loss.backward()
                opt.step()
                hook.save_scalar("lr", 0.1, sm_metric=True)
    hook.close()
    (metrics_file,) = (tmp_path / "metrics").iterdir()
    lines = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    got = {(m["MetricName"], m["IterationNumber"]): m["Value"] for m in lines}
    expected = {(f"CrossEntropyLoss_output_0_{mode}", i): pytest.approx(v, rel=1e-6)
                for (mode, i), v in losses.items() if i % 2 == 0}
    expected.update({("scalar/lr_TRAIN", i): 0.1 for i in range(4)})
    assert got == expected
    assert all(isinstance(m["Timestamp"], int) for m in lines)


def test_save_tensor_with_torch_tensors(tmp_path):
    out = tmp_path / "run"
    model = MLP()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    model(torch.randn(2, 6))
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    hook.save_tensor("custom/t", t, ["custom_a", "custom_b"])
    t.add_(100)  # the saved value is a snapshot
    hook.close()
    data = read_out_dir(out)
    np.testing.assert_array_equal(data[("worker_0", 0)].tensors["custom/t"],
                                  np.arange(6, dtype=np.float32).reshape(2, 3))


def test_internal_error_disables_hook_once_and_training_continues(tmp_path, logs, monkeypatch):
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients"])
    hook.register_module(model)
    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise RuntimeError("synthetic failure")

    from smdebug_lite.pytorch.capture import StepBuffer

    monkeypatch.setattr(StepBuffer, "capture_many", broken)  # (the parameters' snapshots)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        model(torch.randn(2, 6)).sum().backward()
        opt.step()
    hook.close()
    assert hook.disabled and len(calls) == 1
    errors = logs.messages(logging.ERROR)
    assert len(errors) == 1 and "synthetic failure" in errors[0] and "forward_pre_hook" in errors[0]


def test_unmatched_collection_is_reported_once(tmp_path, logs):
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "mystery"])
    hook.get_collection("mystery").include("no_such_tensor")
    hook.register_module(model)
    for _ in range(3):
        model(torch.randn(2, 6))
    hook.close()
    warnings = [m for m in logs.messages() if "mystery" in m]
    assert len(warnings) == 1 and "no_such_tensor" in warnings[0] and "include_regex" in warnings[0]


@pytest.mark.parametrize("record", [False, True])
def test_a_loss_never_registered_nor_recorded_is_explained(tmp_path, logs, record):
    """``losses`` is always included; a loop that computes its loss with a function saves none
    until it records it, and the warning says how."""
    out = tmp_path / "run"
    model = MLP()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights"])
    hook.register_module(model)
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 6)), torch.tensor([0, 1]))
        if record:
            hook.record_tensor_value("loss", loss)
    hook.close()
    warnings = [m for m in logs.messages() if "'losses'" in m]
    saved = read_out_dir(out)[("worker_0", 1)].tensors
    if record:
        assert not warnings and "loss_output_0" in saved
    else:
        assert len(warnings) == 1 and "register_loss" in warnings[0], warnings
        assert set(saved) == {"MLP_fc1.weight", "MLP_fc2.weight"}


def test_gradients_from_autograd_grad_are_explained_when_nothing_is_saved(tmp_path, logs):
    """A functional loop (``torch.autograd.grad``) never fills ``.grad``, so the gradients
    collection saves nothing: the warning says why, instead of blaming its regex."""
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients"])
    hook.register_module(model)
    for _ in range(3):
        loss = model(torch.randn(2, 6)).sum()
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= 0.1 * g
    hook.close()
    warnings = [m for m in logs.messages() if "'gradients'" in m]
    assert len(warnings) == 1 and "torch.autograd.grad()" in warnings[0], warnings
    assert not [m for m in logs.messages() if "'weights'" in m]
    saved = read_out_dir(tmp_path / "run")[("worker_0", 2)].tensors
    assert set(saved) == {"MLP_fc1.weight", "MLP_fc2.weight"}


def test_add_module_tensors(tmp_path):
    model = MLP()
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["fc2_io"])
    hook.get_collection("fc2_io").add_module_tensors(model.fc2, inputs=True, outputs=True)
    hook.register_module(model)
    model(torch.randn(2, 6))
    hook.close()
    t = read_out_dir(out)[("worker_0", 0)].tensors
    assert set(t) == {"fc2_input_0", "fc2_output_0"}


def test_collections_file(tmp_path):
    _, _, hook = _run(tmp_path, train_steps=2, eval_steps=0,
                      include_collections=["weights", "gradients"])
    import json
    doc = json.loads((tmp_path / "run/collections/000000000/worker_0_collections.json").read_text())
    assert doc["_meta"] == {"num_workers": 1}
    colls = doc["collections"]
    assert {"all", "default", "weights", "biases", "gradients", "losses"} <= set(colls)
    assert colls["weights"]["tensor_names"] == ["MLP_fc1.weight", "MLP_fc2.weight"]
    assert colls["gradients"]["tensor_names"] == sorted(G)
    assert colls["losses"]["tensor_names"] == [LOSS]
    assert colls["weights"]["save_config"]["TRAIN"]["save_interval"] == 500
    assert hook.get_collections()["weights"].name == "weights"
    assert isinstance(hook.get_collection(CollectionKeys.GRADIENTS), smd.Collection)


def test_dry_run_writes_nothing(tmp_path):
    out = tmp_path / "run"
    _run(tmp_path, train_steps=2, eval_steps=1, dry_run=True,
         save_config=smd.SaveConfig(save_interval=1))
    assert not out.exists() or not any(out.rglob("*.tfevents"))


def test_low_precision_tensors_are_exact(tmp_path):
    out = tmp_path / "run"
    model = MLP()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    model(torch.randn(2, 6))
    values = {"bf16": torch.randn(3, 4).to(torch.bfloat16)}
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            values[name] = torch.randn(5).to(getattr(torch, name))
    for name, t in values.items():
        hook.save_tensor(f"lp/{name}", t)
    hook.record_tensor_value("functional_loss", torch.tensor(0.25))
    hook.close()
    saved = read_out_dir(out)[("worker_0", 0)].tensors
    for name, t in values.items():
        np.testing.assert_array_equal(saved[f"lp/{name}"], t.float().numpy(), err_msg=name)
    assert float(saved["functional_loss_output_0"]) == 0.25  # matches the losses regex


def test_reductions_travel_to_the_host_in_one_packed_copy():
    """The accelerator path (one transfer per device), exercised with CPU tensors."""
    from smdebug_lite.pytorch.capture import cpu_tensor_to_numpy, packed_to_host

    parts = [
        ([0, 3], torch.tensor([1.5, -2.0], dtype=torch.bfloat16)),
        ([1], torch.tensor([True])),
        ([2, 4, 5], torch.tensor([1e300, -3.0, 7.25], dtype=torch.float64)),
        ([6], torch.tensor([2**40], dtype=torch.int64)),
        ([7, 8], torch.tensor([0.1, 0.2], dtype=torch.float32)),
    ]
    back = dict((tuple(i), t) for i, t in packed_to_host(parts))
    for idx, t in parts:
        got = back[tuple(idx)]
        assert got.dtype == t.dtype
        np.testing.assert_array_equal(cpu_tensor_to_numpy(got).astype(np.float64),
                                      cpu_tensor_to_numpy(t).astype(np.float64))


def test_schedule_changed_mid_run_applies_from_the_next_step(tmp_path):
    """Steps between saves skip the schedule checks; a schedule changed meanwhile (a new
    SaveConfig, an attribute of a SaveConfigMode, a save_steps list edited in place) is still
    honoured at once."""
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=10),
                    include_collections=["weights"])
    model = MLP()
    hook.register_module(model)
    hook.set_mode(smd.modes.TRAIN)
    x = torch.randn(2, 6)
    for step in range(25):
        if step == 3:
            hook.get_collection("weights").save_config = smd.SaveConfig(save_interval=4)
        if step == 14:
            hook.get_collection("weights").save_config.get_save_config(smd.modes.TRAIN).save_interval = 5
        if step == 17:  # a save_steps list edited in place, between saves
            hook.get_collection("weights").save_config.get_save_config(smd.modes.TRAIN).save_steps.append(18)
        model(x)
    hook.close()
    assert steps_of(read_out_dir(out), "MLP_fc1.weight", "TRAIN") == [0, 4, 8, 12, 15, 18, 20]


def test_set_step_backwards_saves_a_scheduled_step(tmp_path):
    out = tmp_path / "run"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=10),
                    include_regex=["w"], include_collections=[])
    hook.set_mode(smd.modes.TRAIN)
    for step in (21, 25, 20, 23):
        hook.set_step(step)
        hook.save_tensor("w", np.array([float(step)]), "w")
    hook.close()
    assert steps_of(read_out_dir(out), "w", "TRAIN") == [20]


def test_gradient_hooks_are_attached_only_while_a_step_saves_gradients(tmp_path):
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=3),
                    include_collections=["gradients"])
    model = MLP()
    hook.register_module(model)
    attached = []
    for _ in range(7):
        model(torch.randn(2, 6)).sum().backward()
        attached.append(sum(bool(p._post_accumulate_grad_hooks) for p in model.parameters()))
    hook.close()
    assert attached == [4, 0, 0, 4, 0, 0, 4]
    assert steps_of(read_out_dir(tmp_path / "run"), "gradient/MLP_fc1.weight", "GLOBAL") == [0, 3, 6]


def test_gradient_hooks_leave_no_hook_dict_behind_and_keep_the_users_own(tmp_path):
    """Between saving steps a parameter has no hook dict at all (torch calls into Python for
    an empty one at every backward pass); hooks the user registers on parameters, before the
    hook or while its own are detached, run at every backward pass, and after `remove()`."""
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=3),
                    include_collections=["gradients"])
    model = MLP()
    calls = {"before": 0, "later": 0}
    model.fc1.weight.register_post_accumulate_grad_hook(lambda p: calls.__setitem__("before", calls["before"] + 1))
    hook.register_module(model)
    dicts = []
    for step in range(7):
        model(torch.randn(2, 6)).sum().backward()
        if step == 1:  # our hooks are detached now: this makes the parameter a new dict
            model.fc2.weight.register_post_accumulate_grad_hook(
                lambda p: calls.__setitem__("later", calls["later"] + 1))
        dicts.append([p._post_accumulate_grad_hooks is not None for p in model.parameters()])
    hook.remove()
    model(torch.randn(2, 6)).sum().backward()
    hook.close()
    assert dicts[0] == dicts[3] == [True] * 4  # saving steps
    assert dicts[1] == dicts[2] == [True, False, True, False]  # the user's hooks only
    assert calls == {"before": 8, "later": 6}
    assert steps_of(read_out_dir(tmp_path / "run"), "gradient/MLP_fc1.weight", "GLOBAL") == [0, 3, 6]
    assert steps_of(read_out_dir(tmp_path / "run"), "gradient/MLP_fc2.weight", "GLOBAL") == [0, 3, 6]
    remaining = [len(p._post_accumulate_grad_hooks or {}) for p in model.parameters()]
    assert remaining == [1, 0, 1, 0]  # only the user's hooks


def test_host_buffer_pool_keeps_what_a_step_takes():
    """Six snapshots of one shape per step (a model with six equal layers) are all reused."""
    from smdebug_lite.pytorch.capture import HostBuffers

    pool = HostBuffers()
    like = torch.zeros(4, 4)
    taken = [pool.take(like) for _ in range(6)]
    pool.end_step()
    pool.give_back(taken)
    again = [pool.take(like) for _ in range(6)]
    # The same buffers, taken in the same order: each tensor lands where it did last step (the
    # writer process then already knows where every snapshot lives).
    assert [id(t) for t in again] == [id(t) for t in taken]


def test_snapshots_reuse_their_shared_memory_and_steps_go_over_in_short(tmp_path):
    """Every saved step after the first reuses the same shared-memory buffers, and is handed
    over as "again" (names and places known); the values written are still each step's own."""
    model = nn.Sequential(nn.Linear(4, 3))
    hook = smd.Hook(out_dir=str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients"])
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    expected = {}
    sent = []
    channel = None
    try:
        for step in range(12):
            # Steps 0 and 2 are snapshot in private memory (the writer process is not known
            # before the first step is handed over), step 4 is the first in shared memory and is
            # sent in full; from step 6 on, only "again".
            if step == 6:
                if not hasattr(hook.trial_writer, "proc"):
                    pytest.skip("no writer process on this platform")
                channel = hook.trial_writer.proc.channel
                board = hook.trial_writer.proc.board
                posted_before = board._slots[board._HEAD]
                # (a message is (sequence number, kind, ...))
                channel.send = lambda msg, fds=(), send=channel.send: (sent.append(msg[1]), send(msg, fds))[1]
            opt.zero_grad()
            if step % 2 == 0:
                expected[step] = model[0].weight.detach().clone().numpy()
            model(torch.randn(2, 4)).sum().backward()
            if step % 2 == 0:
                expected[("grad", step)] = model[0].weight.grad.clone().numpy()
            opt.step()
            if step % 2 == 1:  # the saved step before was handed over: let it be written
                hook.trial_writer.flush()
        hook.close()
    finally:
        if channel is not None:
            del channel.send  # the writer process outlives this test
    # Steps 6, 8 and 10 were handed over in short: on the board's ring, or as "again" messages.
    assert "step" not in sent
    assert board._slots[board._HEAD] - posted_before + sent.count("again") == 3
    out = read_out_dir(tmp_path / "run")
    for step in range(0, 12, 2):
        t = out[("worker_0", step)].tensors
        np.testing.assert_array_equal(t["Sequential_0.weight"], expected[step])
        np.testing.assert_array_equal(t["gradient/Sequential_0.weight"], expected[("grad", step)])


def test_cpu_snapshots_go_to_the_writer_process_shared_memory(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3))
    hook = smd.Hook(out_dir=str(tmp_path), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights"])
    hook.register_module(model)
    for _ in range(3):
        model(torch.randn(2, 4))
    proc = hook.trial_writer.proc if hasattr(hook.trial_writer, "proc") else None
    if proc is None:
        pytest.skip("no writer process on this platform")
    # the raw copy captured this step, not yet handed over (or replayed)
    snapshot = hook.step_buffer.snapshots()[0]
    assert proc.arena.locate(snapshot) is not None  # copied once, read in place by the writer
    hook.close()


@pytest.mark.parametrize("writer", ["process", "thread"])
@pytest.mark.slow
def test_a_forked_child_exiting_does_not_end_the_parents_run(tmp_path, writer):
    """The child's exit handlers must not close the parent's hook (which would write
    training_job_end.ts while the parent still trains)."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, sys
        import torch
        import smdebug_lite.pytorch as smd
        out = {str(tmp_path)!r}
        hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                        include_collections=["weights"])
        model = torch.nn.Linear(2, 2)
        hook.register_module(model)
        model(torch.randn(1, 2))
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a normal exit: exit handlers run
        os.waitpid(pid, 0)
        print("after child", os.path.exists(os.path.join(out, "training_job_end.ts")), flush=True)
        model(torch.randn(1, 2))
        hook.close()
        print("after close", os.path.exists(os.path.join(out, "training_job_end.ts")), flush=True)
    """)
    env = {**os.environ, "SMDEBUG_WRITER": writer}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env, cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    assert "after child False" in out.stdout and "after close True" in out.stdout, out.stdout


def test_a_backward_pass_that_fails_does_not_cost_later_gradients(tmp_path):
    """Gradients are copied when their backward pass has finished; a pass that raises half-way
    leaves nothing behind that would stop later steps from saving theirs."""
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["gradients"])
    hook.register_module(model)
    expected = {}
    for step in range(5):
        model.zero_grad()
        out = model(torch.randn(3, 6))
        if step == 0:  # fails after the last layer's gradients were accumulated
            hidden = model.fc1(torch.randn(3, 6))
            hidden.register_hook(lambda g: (_ for _ in ()).throw(RuntimeError("boom")))
            with pytest.raises(RuntimeError, match="boom"):
                (out.sum() + hidden.sum()).backward()
            continue
        out.sum().backward()
        expected[step] = model.fc1.weight.grad.clone().numpy()
    hook.close()
    data = read_out_dir(tmp_path / "run")
    assert steps_of(data, "gradient/MLP_fc1.weight", "GLOBAL") == [2, 4]
    for step in (2, 4):
        np.testing.assert_array_equal(value_at(data, "gradient/MLP_fc1.weight", "GLOBAL", step),
                                      expected[step])


def test_a_copy_of_a_hooked_model_is_another_model(tmp_path):
    """copy.deepcopy (an EMA or best-so-far model) and torch.save of a whole hooked model work;
    the copy's forward passes are not steps of the hooked model, which saves on as before."""
    import copy
    import io

    out = tmp_path / "run"
    model, loss_fn = MLP(), nn.CrossEntropyLoss()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    loss_fn(model(x), y)
    twin = copy.deepcopy(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    for m in (twin, loaded, twin, loaded):
        loss_fn(m(x), y)
    loss_fn(model(x), y)
    assert hook.step == 1  # two forward passes of the hooked model, whatever the copies did
    hook.close()
    data = read_out_dir(out)
    assert sorted(step for _, step in data) == [0, 1]
    assert np.array_equal(data[("worker_0", 1)].tensors["MLP_fc1.weight"],
                          twin.fc1.weight.detach().numpy())  # (nobody trained: same weights)
    from smdebug_lite.pytorch.torch_hooks import Inert

    for m in (twin, loaded):
        assert all(isinstance(h, Inert) for h in m._forward_pre_hooks.values())
