"""Steps counted by `smdebug_lite.pytorch.step_call.StepCall` (the registered module's
``_compiled_call_impl``): every way of calling, copying or wrapping the module still counts
exactly its own forward passes, and `remove()` leaves the module as it was."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from _pytorch_support import read_out_dir, seeded_without_hook, steps_of  # noqa: F401  (a fixture)
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.pytorch.step_call import StepCall

torch.set_num_threads(1)


pytestmark = pytest.mark.usefixtures("seeded_without_hook")


def _hooked(tmp_path, interval=1):
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    hook = smd.Hook(out_dir=str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=["weights"])
    hook.register_module(model)
    return model, hook


def test_forward_passes_are_counted_without_torchs_hook_path(tmp_path, monkeypatch):
    model, hook = _hooked(tmp_path, interval=2)
    assert isinstance(model._compiled_call_impl, StepCall)
    slow = []
    call_impl = nn.Module._call_impl
    monkeypatch.setattr(nn.Module, "_call_impl", lambda self, *a, **k: (slow.append(self), call_impl(self, *a, **k))[1])
    x = torch.randn(2, 4)
    for _ in range(4):
        expected = model[2](model[1](model[0](x)))
        torch.testing.assert_close(model(x), expected)
    assert model not in slow  # the registered module itself never went through `_call_impl`
    assert hook.step == 3
    # Another hook on the module, or a global one: torch's path runs it, and still counts steps.
    seen = []
    h = model.register_forward_hook(lambda m, i, o: seen.append("module"))
    g = nn.modules.module.register_module_forward_pre_hook(lambda m, i: seen.append("global") if m is model else None)
    model(x)
    h.remove()
    g.remove()
    model(x)
    assert seen == ["global", "module"] and hook.step == 5
    hook.close()
    assert steps_of(read_out_dir(tmp_path / "run"), "Sequential_0.weight", "GLOBAL") == [0, 2, 4]


def test_remove_restores_the_module(tmp_path):
    model, hook = _hooked(tmp_path)
    hook.remove()
    assert "_compiled_call_impl" not in model.__dict__ and model._compiled_call_impl is None
    assert "_replicate_for_data_parallel" not in model.__dict__
    hook.close()


def test_compile_after_registration_keeps_counting(tmp_path):
    model, hook = _hooked(tmp_path)
    model(torch.randn(2, 4))
    model.compile(backend="eager")  # replaces _compiled_call_impl
    for _ in range(3):
        model(torch.randn(2, 4))
    assert hook.step == 3
    hook.close()
    assert model._compiled_call_impl is not None  # remove() left the compiled call alone
    assert steps_of(read_out_dir(tmp_path / "run"), "Sequential_0.weight", "GLOBAL") == [0, 1, 2, 3]


def test_copies_and_replicas_do_not_call_the_original(tmp_path):
    model, hook = _hooked(tmp_path)
    model(torch.randn(2, 4))
    twin = copy.deepcopy(model)
    assert twin._compiled_call_impl is None
    with torch.no_grad():
        twin[0].weight.zero_()
    x = torch.randn(2, 4)
    torch.testing.assert_close(twin(x), twin[2](twin[1](twin[0](x))))  # its own weights
    assert hook.step == 0  # the copy's forward passes are not steps
    replica = model._replicate_for_data_parallel()  # what DataParallel does per device
    assert replica._compiled_call_impl is None and "_replicate_for_data_parallel" not in replica.__dict__
    buf = io.BytesIO()
    torch.save(model, buf)  # a whole pickled model carries no StepCall
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert loaded._compiled_call_impl is None
    loaded(x)
    assert hook.step == 0
    model(x)
    assert hook.step == 1
    hook.close()


@pytest.mark.filterwarnings("ignore")
def test_jit_trace_of_a_registered_model(tmp_path):
    model, hook = _hooked(tmp_path)
    x = torch.randn(2, 4)
    traced = torch.jit.trace(model, x)
    torch.testing.assert_close(traced(x), model[2](model[1](model[0](x))))
    hook.close()
