"""`detect_non_finite=True` on real training that turns non-finite at a known step in a known
layer: forward, backward, loss and weights; the record, the step saved for the modules on the
way, ExplodingTensor using the record, two gloo workers, DebugHookConfig JSON, the Lightning
callback, and smdebug 1.0.34 reading the trial."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from refvenv import ref_python, run_ref
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import ExplodingTensor
from smdebug_lite.trials import create_trial

REPO = Path(__file__).resolve().parents[1]
BAD_STEP = 3
STEPS = 6

torch.set_num_threads(1)


class Boom(nn.Module):
    """Multiplies by +inf at one forward pass (counted from 0)."""

    def __init__(self, at: int = -1) -> None:
        super().__init__()
        self.at, self.calls, self.seen = at, 0, None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bad = self.calls == self.at
        self.calls += 1
        if bad:
            out = x * float("inf")
            self.seen = out.detach().clone()
            return out
        return x * 1.0


class NanBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, bad: bool) -> torch.Tensor:
        ctx.bad = bad
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return (torch.full_like(grad, float("nan")) if ctx.bad else grad), None


class BadGrad(nn.Module):
    """Identity forward; its backward returns NaN at one step."""

    def __init__(self, at: int = -1) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return NanBackward.apply(x, self.calls - 1 == self.at)


class Net(nn.Module):
    def __init__(self, boom_at: int = -1, nan_grad_at: int = -1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.boom = Boom(boom_at)
        self.mid = BadGrad(nan_grad_at)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.mid(self.boom(self.fc1(x))))


class BadLoss(nn.Module):
    """Mean squared value; +inf at one call."""

    def __init__(self, at: int = -1) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, y: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        loss = ((y - target) ** 2).mean()
        return loss * float("inf") if self.calls - 1 == self.at else loss


class InfSGD(torch.optim.SGD):
    """SGD whose update at one step writes +inf into fc2.weight[0, 0]."""

    def __init__(self, model: Net, at: int) -> None:
        super().__init__(model.parameters(), lr=0.05)
        self.model, self.at, self.calls = model, at, 0

    @torch.no_grad()
    def step(self, closure=None):
        super().step(closure)
        if self.calls == self.at:
            self.model.fc2.weight[0, 0] = float("inf")
        self.calls += 1


def train(out: Path, net: Net, loss_fn: nn.Module | None = None, opt=None,
          hook: smd.Hook | None = None, steps: int = STEPS) -> smd.Hook:
    torch.manual_seed(0)
    if hook is None:
        hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1000),
                        include_collections=["losses"], detect_non_finite=True)
    loss_fn = loss_fn or BadLoss()
    hook.register_module(net)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    opt = opt or torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(net(torch.randn(5, 4, generator=g)), torch.zeros(5, 2)).backward()
        opt.step()
    hook.close()
    return hook


def record_of(out: Path) -> dict:
    files = list((out / "non_finite").glob("*.json"))
    assert [f.name for f in files] == ["worker_0.json"]
    return json.loads(files[0].read_text())


def names_at(out: Path, step: int) -> set[str]:
    trial = create_trial(str(out))
    return {n for n in trial.tensor_names() if step in trial.tensor(n).steps()}


def test_forward_offender_is_recorded_and_its_step_saved(tmp_path, caplog):
    net = Net(boom_at=BAD_STEP)
    with caplog.at_level("WARNING"):
        train(tmp_path, net)
    rec = record_of(tmp_path)
    seen = net.boom.seen
    assert {k: rec[k] for k in ("step", "mode", "mode_step", "worker", "phase", "module",
                                "tensor")} == {
        "step": BAD_STEP, "mode": "TRAIN", "mode_step": BAD_STEP, "worker": "worker_0",
        "phase": "forward", "module": "boom", "tensor": "boom_output_0"}
    assert (rec["nan"], rec["posinf"], rec["neginf"]) == (
        int(seen.isnan().sum()), int(seen.isposinf().sum()), int(seen.isneginf().sum()))
    assert [r.getMessage() for r in caplog.records if "non-finite" in r.getMessage()
            and "worker_0.json" in r.getMessage()]
    trial = create_trial(str(tmp_path))
    assert BAD_STEP in trial.steps()
    # the modules on the way: outputs up to the offender, the offender's inputs
    assert {"fc1_output_0", "boom_input_0", "boom_output_0"} <= names_at(tmp_path, BAD_STEP)
    np.testing.assert_array_equal(trial.tensor("boom_output_0").value(BAD_STEP), seen.numpy())
    first = trial.first_non_finite()
    assert first is not None and (first.step, first.phase) == (BAD_STEP, "forward")


@pytest.mark.parametrize("path", ["other_hook", "forward_hooks", "start_step"])
def test_forward_offender_on_every_way_outputs_are_kept(tmp_path, path):
    """Module outputs are kept by calls that skip torch's hook path; with another hook on the
    module, with forward hooks (once dynamo compiles) and with steps begun by `start_step`
    (the model's own call passes its outputs on no more) the record is the same."""
    net = Net(boom_at=BAD_STEP)
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_interval=1000),
                    detect_non_finite=True)
    hook.register_module(net)
    seen = []
    if path == "other_hook":
        net.boom.register_forward_hook(lambda m, i, o: seen.append(m))
    if path == "forward_hooks":
        hook.non_finite.keep_forward_hooks()  # (what dynamo's compile-start callback calls)
        assert all("_compiled_call_impl" not in m.__dict__ for m in net.children())
    loss_fn = BadLoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        if path == "start_step":
            hook.start_step(step)
        opt.zero_grad()
        loss_fn(net(torch.randn(5, 4, generator=g)), torch.zeros(5, 2)).backward()
        opt.step()
    hook.close()
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["module"], rec["tensor"]) == (
        BAD_STEP, "forward", "boom", "boom_output_0")
    assert len(seen) == (STEPS if path == "other_hook" else 0)
    # closing leaves every module as it was
    assert all("_compiled_call_impl" not in m.__dict__ and m._compiled_call_impl is None
               and "_replicate_for_data_parallel" not in m.__dict__ for m in net.modules())


def test_copies_of_a_watched_model_are_plain(tmp_path):
    net = Net()
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_interval=1000),
                    detect_non_finite=True)
    hook.register_module(net)
    x = torch.randn(5, 4)
    net(x)
    twin = copy.deepcopy(net)
    assert all(m._compiled_call_impl is None for m in twin.modules())
    torch.testing.assert_close(twin(x), net(x))
    hook.close()


def test_backward_offender_in_backward_order(tmp_path):
    train(tmp_path, Net(nan_grad_at=BAD_STEP))
    rec = record_of(tmp_path)
    # fc2's gradients are computed before the NaN; fc1.bias is the first in backward order
    assert (rec["step"], rec["phase"], rec["module"], rec["tensor"]) == (
        BAD_STEP, "backward", "fc1", "gradient/Net_fc1.bias")
    assert rec["nan"] == 8 and rec["posinf"] == rec["neginf"] == 0
    saved = names_at(tmp_path, BAD_STEP)
    assert {"gradient/Net_fc2.bias", "gradient/Net_fc2.weight", "gradient/Net_fc1.bias",
            "Net_fc1.weight", "Net_fc1.bias"} <= saved
    assert "gradient/Net_fc1.weight" not in saved  # (after the offender)

    trial = create_trial(str(tmp_path))
    result = invoke_rule(ExplodingTensor(trial, collection_names="gradients"))
    assert result.status == "IssuesFound" and result.step == BAD_STEP, result


def _hook(out: Path) -> smd.Hook:
    return smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1000),
                    detect_non_finite=True)


def test_loss_scaler_overflow_is_not_recorded_and_the_watch_goes_on(tmp_path, caplog):
    """float16 autocast with a GradScaler whose first scale overflows the float16 gradients:
    the scaler skips those updates, which is no training gone wrong; a later forward
    offender is still recorded."""
    torch.manual_seed(0)
    hook, net = _hook(tmp_path), Net(boom_at=6)
    hook.register_module(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40, backoff_factor=2.0 ** -16)
    g = torch.Generator().manual_seed(1)
    scales, applied = [], []
    with caplog.at_level("INFO", logger="smdebug_lite"):
        for _ in range(8):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = net(torch.randn(5, 4, generator=g)).float().pow(2).mean()
            scaler.scale(loss).backward()
            before = net.fc1.weight.detach().clone()
            scales.append(scaler.get_scale())
            scaler.step(opt)
            scaler.update()
            applied.append(not torch.equal(before, net.fc1.weight))
    hook.close()
    assert applied[:2] == [False, False] and all(applied[2:6]), (scales, applied)
    assert "was not applied" in caplog.text
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["tensor"]) == (6, "forward", "boom_output_0")


def test_gradient_accumulated_over_steps_is_recorded_when_applied(tmp_path):
    torch.manual_seed(0)
    hook, net = _hook(tmp_path), Net(nan_grad_at=2)
    hook.register_module(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for step in range(6):  # (two forward/backward passes per update)
        net(torch.randn(5, 4, generator=g)).pow(2).mean().backward()
        if step % 2 == 1:
            opt.step()
            opt.zero_grad()
    hook.close()
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["tensor"]) == (2, "backward", "gradient/Net_fc1.bias")


def test_loop_that_updates_the_parameters_itself(tmp_path):
    torch.manual_seed(0)
    hook, net = _hook(tmp_path), Net(nan_grad_at=BAD_STEP)
    hook.register_module(net)
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        net(torch.randn(5, 4, generator=g)).pow(2).mean().backward()
        with torch.no_grad():
            for p in net.parameters():
                p -= 0.05 * p.grad
                p.grad = None
    hook.close()
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["tensor"]) == (
        BAD_STEP, "backward", "gradient/Net_fc1.bias")
    assert "gradient/Net_fc2.bias" in names_at(tmp_path, BAD_STEP)


def test_loss_offender(tmp_path):
    train(tmp_path, Net(), loss_fn=BadLoss(at=BAD_STEP))
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["module"], rec["tensor"], rec["posinf"]) == (
        BAD_STEP, "loss", "BadLoss", "BadLoss_output_0", 1)
    assert {"fc2_output_0", "BadLoss_output_0", "BadLoss_input_0"} <= names_at(tmp_path, BAD_STEP)


def test_weights_written_by_the_optimizer(tmp_path):
    net = Net()
    train(tmp_path, net, opt=InfSGD(net, at=BAD_STEP))
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["module"], rec["tensor"]) == (
        BAD_STEP, "weights", "fc2", "Net_fc2.weight")
    assert (rec["nan"], rec["posinf"], rec["neginf"]) == (0, 1, 0)
    # saved in the step that starts from them
    assert {"Net_fc2.weight", "Net_fc2.bias"} <= names_at(tmp_path, BAD_STEP + 1)


def test_last_update_is_checked_at_close(tmp_path):
    net = Net()
    train(tmp_path, net, opt=InfSGD(net, at=STEPS - 1))
    rec = record_of(tmp_path)
    assert (rec["step"], rec["phase"], rec["tensor"]) == (STEPS - 1, "weights", "Net_fc2.weight")


def test_step_without_backward_is_checked_at_its_end(tmp_path):
    hook = smd.Hook(str(tmp_path), save_config=smd.SaveConfig(save_interval=1000),
                    detect_non_finite=True)
    net = Net(boom_at=2)
    hook.register_module(net)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(4):
            net(torch.randn(3, 4))
    hook.close()
    rec = record_of(tmp_path)
    assert (rec["step"], rec["mode"], rec["mode_step"], rec["phase"], rec["tensor"]) == (
        2, "EVAL", 2, "forward", "boom_output_0")
    assert "boom_output_0" in names_at(tmp_path, 2)


def test_finite_run_writes_no_record(tmp_path):
    hook = train(tmp_path, Net())
    assert not (tmp_path / "non_finite").exists()
    assert create_trial(str(tmp_path)).first_non_finite() is None
    assert hook.arguments.detect_non_finite is True
    off = train(tmp_path / "off", Net(boom_at=1),
                hook=smd.Hook(str(tmp_path / "off"), save_config=smd.SaveConfig(save_interval=1000)))
    assert off.non_finite is None and not (tmp_path / "off" / "non_finite").exists()


def test_from_debug_hook_config_json(tmp_path):
    out = tmp_path / "out"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "1000", "detect_non_finite": "true"},
        "CollectionConfigurations": [],
    }))
    hook = smd.Hook.create_from_json_file(str(path))
    assert hook.arguments.detect_non_finite is True
    train(out, Net(boom_at=2), hook=hook)
    assert record_of(out)["step"] == 2


@pytest.mark.parametrize("value", ["maybe", 3])
def test_a_bad_detect_non_finite_in_json_is_refused_naming_file_and_key(tmp_path, value):
    from smdebug_lite.config.hook_json import HookConfigError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "out"),
                                "HookParameters": {"detect_non_finite": value}}))
    with pytest.raises(HookConfigError) as err:
        smd.Hook.create_from_json_file(str(path))
    assert str(path) in str(err.value)
    assert "HookParameters.detect_non_finite" in str(err.value)
    assert "expected a boolean" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_lightning_callback(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    from torch.utils.data import DataLoader, TensorDataset

    from smdebug_lite.lightning import DebuggerCallback

    class Lit(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Net(boom_at=BAD_STEP)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return ((self.net.fc2(self.net.boom(self.net.fc1(x))) - y) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    data = TensorDataset(torch.randn(40, 4), torch.zeros(40, 2))
    cb = DebuggerCallback(str(tmp_path), save_config=smd.SaveConfig(save_interval=1000),
                          detect_non_finite=True)
    trainer = L.Trainer(max_steps=STEPS, callbacks=[cb], logger=False, enable_progress_bar=False,
                        enable_checkpointing=False, enable_model_summary=False,
                        accelerator="cpu", detect_anomaly=False)
    trainer.fit(Lit(), DataLoader(data, batch_size=5))
    rec = record_of(tmp_path)
    assert (rec["phase"], rec["module"], rec["tensor"]) == ("forward", "net.boom",
                                                            "net.boom_output_0")
    assert rec["step"] == BAD_STEP


RANK_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    sys.path.insert(0, sys.argv[2])
    from test_non_finite_detection import Net, train
    from pathlib import Path

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    train(Path(sys.argv[1]), Net(boom_at=2 + rank))
    dist.barrier()
    dist.destroy_process_group()
    print("RANK DONE", rank)
""")


@pytest.mark.slow
def test_two_gloo_workers_each_write_their_record(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2", GLOO_SOCKET_IFNAME="lo")
        procs.append(subprocess.Popen([sys.executable, str(script), str(out),
                                       str(REPO / "tests")], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path))
    texts = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (p, text) in enumerate(zip(procs, texts, strict=True)):
        assert p.returncode == 0 and f"RANK DONE {rank}" in text, text
    trial = create_trial(str(out))
    records = trial.non_finite_records()
    assert [(r.worker, r.step, r.phase, r.module) for r in records] == [
        ("worker_0", 2, "forward", "boom"), ("worker_1", 3, "forward", "boom")]
    assert trial.first_non_finite().worker == "worker_0"


REF_READER = r"""
import json, sys
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
step = int(sys.argv[2])
print(json.dumps({"steps": t.steps(), "names": sorted(t.tensor_names(step=step)),
                  "value": t.tensor("boom_output_0").value(step).tolist()}))
"""


@pytest.mark.reference
def test_smdebug_1_0_34_reads_the_trial(tmp_path):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    train(tmp_path, Net(boom_at=BAD_STEP))
    got = run_ref(REF_READER, str(tmp_path), str(BAD_STEP))
    assert got.returncode == 0, got.stderr[-3000:]
    doc = json.loads(got.stdout.strip().splitlines()[-1])
    assert doc["steps"] == [0, BAD_STEP]
    assert {"boom_output_0", "boom_input_0", "fc1_output_0"} <= set(doc["names"])
