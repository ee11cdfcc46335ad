"""torch.compile: the default collections add no graph break, and what is saved from a compiled
model equals what an uncompiled twin (same seed, same data) saves."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pytorch_support import (
    MLP,
    read_out_dir,
    seeded_without_hook,  # noqa: F401  (a fixture, see pytestmark)
)
from lazy_module import lazy
from torch import nn

import smdebug_lite.pytorch as smd

pytestmark = pytest.mark.usefixtures("seeded_without_hook")
dynamo_utils = lazy("torch._dynamo.utils", skip=False)  # torch._dynamo: torch imports it lazily

BACKEND = "aot_eager"  # AOTAutograd compiles the backward pass too; graph breaks are dynamo's
STEPS = 5
DEFAULT = ["weights", "biases", "gradients", "losses"]


def _batches(n: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)) for _ in range(n)]


def _run(out, *, compile_how: str | None, collections: list[str] | None = DEFAULT,
         regex: list[str] | None = None, save_config: smd.SaveConfig | None = None,
         reduction_config: smd.ReductionConfig | None = None, hooked: bool = True) -> dict:
    """Train a fresh MLP (seed 0) for STEPS steps; returns dynamo's graph-break count and graph
    count for the run."""
    torch._dynamo.reset()
    dynamo_utils.counters.clear()
    torch.manual_seed(0)
    model, loss_fn = MLP(), nn.MSELoss()
    hook = None
    if hooked:
        hook = smd.Hook(str(out), save_config=save_config or smd.SaveConfig(save_interval=2),
                        include_collections=collections, include_regex=regex,
                        reduction_config=reduction_config)
    call = model
    if compile_how == "torch.compile":  # registered first, compiled after: the common order
        if hook is not None:
            hook.register_module(model)
        call = torch.compile(model, backend=BACKEND)
    elif compile_how == "model.compile":
        if hook is not None:
            hook.register_module(model)
        model.compile(backend=BACKEND)
    elif hook is not None:
        hook.register_module(model)
    if hook is not None:
        hook.register_loss(loss_fn)
        hook.set_mode(smd.modes.TRAIN)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches():
        opt.zero_grad()
        loss_fn(call(x), y).backward()
        opt.step()
    if hook is not None:
        hook.close()
    return {"breaks": sum(dynamo_utils.counters["graph_break"].values()),
            "graphs": dynamo_utils.counters["stats"]["unique_graphs"]}


def _assert_same_trial(compiled_out, eager_out) -> None:
    got, want = read_out_dir(compiled_out), read_out_dir(eager_out)
    assert sorted(got) == sorted(want) and want
    for key, step in want.items():
        assert set(got[key].tensors) == set(step.tensors), key
        for name, value in step.tensors.items():
            np.testing.assert_allclose(got[key].tensors[name], value, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{name} at {key}")


@pytest.mark.parametrize("compile_how", ["torch.compile", "model.compile"])
def test_default_collections_add_no_graph_break(tmp_path, compile_how):
    bare = _run(tmp_path / "bare", compile_how=compile_how, hooked=False)
    hooked = _run(tmp_path / "compiled", compile_how=compile_how,
                  reduction_config=smd.ReductionConfig(reductions=["mean", "max"], norms=["l2"],
                                                       save_raw_tensor=True))
    assert hooked == bare  # same graph breaks (none for this model), same number of graphs
    assert bare["graphs"] >= 1
    _run(tmp_path / "eager", compile_how=None,
         reduction_config=smd.ReductionConfig(reductions=["mean", "max"], norms=["l2"],
                                              save_raw_tensor=True))
    _assert_same_trial(tmp_path / "compiled", tmp_path / "eager")
    names = set(read_out_dir(tmp_path / "compiled")[("worker_0", 0)].tensors)
    assert {"MLP_fc1.weight", "gradient/MLP_fc1.weight", "MSELoss_output_0",
            "smdebug/reductions/l2/gradient/MLP_fc2.weight"} <= names


def test_hook_default_configuration_adds_no_graph_break(tmp_path):
    """No include_collections at all: the hook's own defaults."""
    bare = _run(tmp_path / "bare", compile_how="torch.compile", hooked=False)
    assert _run(tmp_path / "run", compile_how="torch.compile", collections=None) == bare


def test_explain_sees_the_same_graph_breaks_with_the_hook(tmp_path):
    x = torch.randn(4, 6)
    torch._dynamo.reset()
    bare = torch._dynamo.explain(MLP())(x)
    model = MLP()
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=DEFAULT)
    hook.register_module(model)
    torch._dynamo.reset()
    hooked = torch._dynamo.explain(model)(x)
    assert hooked.graph_break_count == bare.graph_break_count == 0
    assert hooked.graph_count == bare.graph_count
    hook.close()


@pytest.mark.parametrize("compile_how", ["torch.compile", "model.compile"])
@pytest.mark.slow
def test_layer_outputs_break_the_graph_but_are_saved_right(tmp_path, compile_how):
    """Module inputs/outputs come from forward hooks, which dynamo does not trace: each hooked
    module splits the graph. The values must still be those of an uncompiled run, including
    when the model is first compiled during a step that saves nothing (dynamo does not
    recompile when hooks come and go, so the hook must be there when it traces)."""
    # steps 0 and 1 save nothing: the model is traced while no step saves
    cfg = smd.SaveConfig(save_steps=[2, 4], start_step=1)
    bare = _run(tmp_path / "bare", compile_how=compile_how, hooked=False)
    hooked = _run(tmp_path / "compiled", compile_how=compile_how, collections=DEFAULT,
                  regex=["fc1_output_0", "relu_input_0"], save_config=cfg)
    assert hooked["breaks"] > bare["breaks"]
    _run(tmp_path / "eager", compile_how=None, collections=DEFAULT,
         regex=["fc1_output_0", "relu_input_0"], save_config=cfg)
    _assert_same_trial(tmp_path / "compiled", tmp_path / "eager")
    data = read_out_dir(tmp_path / "compiled")
    assert sorted(data) == [("worker_0", 2), ("worker_0", 4)]
    for key in data:
        assert {"fc1_output_0", "relu_input_0", "MSELoss_output_0"} <= set(data[key].tensors)


def test_a_class_compiled_before_registration_is_named_in_a_warning(tmp_path, caplog):
    """Dynamo reuses a class's compiled forward for a new instance without checking its module
    hooks: registering one then warns, naming the class and the way out."""
    torch._dynamo.reset()
    compiled = torch.compile(MLP(), backend=BACKEND)
    compiled(torch.randn(4, 6))
    with caplog.at_level("WARNING", logger="smdebug_lite"):
        smd.Hook(str(tmp_path / "a"), save_config=smd.SaveConfig(save_interval=2)).register_module(MLP())
    assert "compiled the forward of MLP" in caplog.text and "torch._dynamo.reset()" in caplog.text
    caplog.clear()
    torch._dynamo.reset()
    with caplog.at_level("WARNING", logger="smdebug_lite"):
        smd.Hook(str(tmp_path / "b"), save_config=smd.SaveConfig(save_interval=2)).register_module(MLP())
    assert "compiled the forward" not in caplog.text
