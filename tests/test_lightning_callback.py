"""smdebug_lite.lightning.DebuggerCallback in real Lightning runs: fit (train + validation), test
and predict of a tiny LightningModule, checked tensor by tensor against what the module saw."""

from __future__ import annotations

import functools
import json
import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _pytorch_support import read_with_our_trial, read_with_smdebug, ref_available
from lazy_module import lazy, require_module
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import smdebug_lite as smd
import smdebug_lite.pytorch as smd_torch
from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import get_builtin_rule
from smdebug_lite.trials import create_trial

require_module("lightning")
L = lazy("lightning.pytorch")
smd_lightning = lazy("smdebug_lite.lightning")

torch.set_num_threads(1)
TRAIN, EVAL, PREDICT = smd.modes.TRAIN, smd.modes.EVAL, smd.modes.PREDICT
BATCH, TRAIN_BATCHES, VAL_BATCHES, TEST_BATCHES, EPOCHS = 8, 6, 3, 4, 2


@functools.cache
def _tiny_lit_class() -> type:
    """TinyLit, built on first use: its base class comes from Lightning, imported lazily."""

    class TinyLit(L.LightningModule):
        """Records what each batch saw: the weights it started from, its loss, gradient and rate.
        Its steps call the submodules directly, never `self(x)`."""

        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 3)
            self.seen: dict[str, list] = {k: [] for k in ("w", "loss", "grad", "lr", "val", "test")}

        def _loss(self, batch) -> torch.Tensor:
            x, y = batch
            return F.cross_entropy(self.fc2(torch.relu(self.fc1(x))), y)

        def training_step(self, batch, batch_idx):
            self.seen["w"].append(self.fc1.weight.detach().clone())
            self.seen["lr"].append(self.lr_schedulers().get_last_lr()[0])
            loss = self._loss(batch)
            self.seen["loss"].append(loss.item())
            self.log("train_loss", loss)
            return loss

        def on_after_backward(self) -> None:
            self.seen["grad"].append(self.fc1.weight.grad.detach().clone())

        def validation_step(self, batch, batch_idx):
            loss = self._loss(batch)
            if not self.trainer.sanity_checking:
                self.seen["val"].append(loss.item())
            self.log("val_loss", loss)
            return loss

        def test_step(self, batch, batch_idx):
            loss = self._loss(batch)
            self.seen["test"].append(loss.item())
            self.log("test_loss", loss)
            return {"loss": loss}

        def predict_step(self, batch, batch_idx):
            return self.fc2(torch.relu(self.fc1(batch[0])))

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)}

    return TinyLit


def _tiny_lit():
    return _tiny_lit_class()()


def _loader(n_batches: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    ds = TensorDataset(torch.randn(n_batches * BATCH, 8, generator=g),
                       torch.randint(0, 3, (n_batches * BATCH,), generator=g))
    return DataLoader(ds, batch_size=BATCH)


def _trainer(callback, **kwargs) -> L.Trainer:
    return L.Trainer(callbacks=[callback], logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     accelerator="cpu", devices=1, **kwargs)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for var in ("SMDEBUG_CONFIG_FILE_PATH", "USE_SMDEBUG", "TRAINING_JOB_NAME"):
        monkeypatch.delenv(var, raising=False)
    smd_torch.del_hook()
    yield
    smd_torch.del_hook()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """fit (with the default sanity check), then test and predict; every 2nd step saved."""
    torch.manual_seed(0)
    out_dir = str(tmp_path_factory.mktemp("lightning") / "trial")
    cb = smd_lightning.DebuggerCallback(out_dir, save_config=smd.SaveConfig(save_interval=2),
                          include_collections=["weights", "biases", "gradients", "losses"])
    model = _tiny_lit()
    trainer = _trainer(cb, max_epochs=EPOCHS)
    trainer.fit(model, _loader(TRAIN_BATCHES, 1), _loader(VAL_BATCHES, 2))
    fit_metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    trainer.test(model, _loader(TEST_BATCHES, 3), verbose=False)
    trainer.predict(model, _loader(2 * 2, 4))
    cb.close()
    return out_dir, model, fit_metrics


def _value(trial, name: str, step: int, mode) -> np.ndarray:
    return np.asarray(trial.tensor(name).value(step, mode=mode))


def test_one_step_per_batch_in_the_mode_of_its_loop(run):
    trial = create_trial(run[0])
    assert trial.steps(mode=TRAIN) == list(range(0, EPOCHS * TRAIN_BATCHES, 2))
    # EVAL: validation batches 0-5, test batches 6-9 (every 2nd saved), and the last step of
    # each loop, where its metrics are saved; the sanity check's batches are no steps
    assert trial.steps(mode=EVAL) == [0, 2, 4, 5, 6, 8, 9]
    assert trial.steps(mode=PREDICT) == [0, 2]
    names = set(trial.tensor_names())
    assert {"TinyLit_fc1.weight", "TinyLit_fc2.bias", "gradient/TinyLit_fc1.weight",
            "loss_output_0", "scalar/lr/0", "scalar/train_loss", "scalar/val_loss",
            "scalar/test_loss"} <= names


def test_weights_gradients_losses_and_rates_are_what_training_saw(run):
    out_dir, model, _ = run
    trial = create_trial(out_dir)
    seen = model.seen
    for s in trial.tensor("TinyLit_fc1.weight").steps(mode=TRAIN):
        np.testing.assert_array_equal(_value(trial, "TinyLit_fc1.weight", s, TRAIN), seen["w"][s].numpy())
        np.testing.assert_array_equal(_value(trial, "gradient/TinyLit_fc1.weight", s, TRAIN),
                                      seen["grad"][s].numpy())
        assert float(_value(trial, "loss_output_0", s, TRAIN).item()) == pytest.approx(seen["loss"][s], abs=0)
        assert float(_value(trial, "scalar/train_loss", s, TRAIN).item()) == pytest.approx(seen["loss"][s], abs=0)
        # the rate this batch's update used: 0.1, halved after the first epoch
        assert float(_value(trial, "scalar/lr/0", s, TRAIN).item()) == seen["lr"][s]
        assert seen["lr"][s] == 0.1 * 0.5 ** (s // TRAIN_BATCHES)
    assert "gradient/TinyLit_fc1.weight" not in trial.tensor_names(step=0, mode=EVAL)


def test_evaluation_losses_and_logged_metrics(run):
    out_dir, model, fit_metrics = run
    trial = create_trial(out_dir)
    vals, tests = model.seen["val"], model.seen["test"]
    assert len(vals) == EPOCHS * VAL_BATCHES and len(tests) == TEST_BATCHES
    for s in (0, 2, 4):
        assert float(_value(trial, "loss_output_0", s, EVAL).item()) == pytest.approx(vals[s], abs=0)
    for s in (6, 8):
        assert float(_value(trial, "loss_output_0", s, EVAL).item()) == pytest.approx(tests[s - 6], abs=0)
    # epoch means as Lightning computed them, at the last step of each loop
    assert float(_value(trial, "scalar/val_loss", 2, EVAL).item()) == pytest.approx(np.mean(vals[:3]), rel=1e-6)
    assert float(_value(trial, "scalar/val_loss", 5, EVAL).item()) == pytest.approx(fit_metrics["val_loss"], rel=1e-7)
    assert float(_value(trial, "scalar/test_loss", 9, EVAL).item()) == pytest.approx(np.mean(tests), rel=1e-6)
    # predict: the final weights, no gradients
    final = model.fc1.weight.detach().numpy()
    np.testing.assert_array_equal(_value(trial, "TinyLit_fc1.weight", 2, PREDICT), final)


def test_rules_run_on_the_trial(run):
    trial = create_trial(run[0])
    rule = get_builtin_rule("VanishingGradient")
    assert invoke_rule(rule(trial, threshold="1e-12")).status == "NoIssuesFound"
    assert invoke_rule(rule(trial, threshold="1e9")).status == "IssuesFound"  # gradients were read


@pytest.mark.reference
def test_smdebug_1_0_34_reads_the_trial(run):
    ok, reason = ref_available()
    if not ok:
        pytest.skip(reason)
    out_dir = run[0]
    ref = read_with_smdebug(out_dir)[out_dir]
    ours = read_with_our_trial(out_dir)
    assert ref["steps"] == ours["steps"] and ref["tensor_names"] == ours["tensor_names"]
    assert ref["values"] == ours["values"]
    assert ref["values"]["TRAIN/2/scalar/lr/0"][2] == [0.1]


def test_configured_from_the_debughookconfig_json(tmp_path, monkeypatch):
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({
        "S3OutputPath": "s3://bucket/prefix", "LocalPath": str(tmp_path / "from_env"),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": "gradients"}]}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config))
    cb = smd_lightning.DebuggerCallback()  # no out_dir: from the JSON, as the hooks' get_hook does
    _trainer(cb, max_epochs=1, limit_train_batches=3).fit(_tiny_lit(), _loader(TRAIN_BATCHES, 1))
    cb.close()
    trial = create_trial(str(tmp_path / "from_env"))
    assert trial.steps(mode=TRAIN) == [0, 1, 2]
    assert "gradient/TinyLit_fc2.weight" in trial.tensor_names()

    config.write_text(config.read_text().replace("from_env", "explicit"))
    explicit = smd_lightning.DebuggerCallback.create_from_json_file(str(config))
    assert explicit.hook.out_dir == str(tmp_path / "explicit")
    explicit.close()


def test_without_configuration_it_saves_nothing_and_training_runs(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "absent.json"))
    with caplog.at_level(logging.WARNING):
        cb = smd_lightning.DebuggerCallback()
    assert cb.hook is None and "no usable DebugHookConfig JSON" in caplog.text
    model = _tiny_lit()
    _trainer(cb, max_epochs=1, limit_train_batches=2).fit(model, _loader(TRAIN_BATCHES, 1))
    assert len(model.seen["loss"]) == 2
    with pytest.raises(SMDebugTypeError, match="hook=object must be a smdebug_lite.pytorch.Hook"):
        smd_lightning.DebuggerCallback(hook=object())


DDP_SCRIPT = r"""
import os
import sys
import lightning.pytorch as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import smdebug_lite as smd
from smdebug_lite.lightning import DebuggerCallback

class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)
    def training_step(self, batch, batch_idx):
        return F.cross_entropy(self.fc(batch[0]), batch[1])
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))
torch.manual_seed(int(os.environ.get("LOCAL_RANK", "0")))  # each rank starts elsewhere: DDP syncs
cb = DebuggerCallback(sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                      include_workers="all", include_collections=["weights", "gradients", "losses"])
trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp", callbacks=[cb],
                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Lit(), DataLoader(data, batch_size=8))
cb.close()
"""


@pytest.mark.slow
def test_ddp_one_worker_per_rank(tmp_path):
    """Lightning's ddp strategy (two CPU processes, gloo): each rank is its own worker."""
    import subprocess
    import sys

    script = tmp_path / "train_ddp.py"
    script.write_text(DDP_SCRIPT)
    out_dir = tmp_path / "trial"
    proc = subprocess.run([sys.executable, str(script), str(out_dir)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trial = create_trial(str(out_dir))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"] and trial.num_workers == 2
    assert trial.steps(mode=TRAIN) == [0, 1, 2, 3]  # 32 samples per rank, batches of 8
    weight = trial.tensor("Lit_fc.weight")  # rank 0's, broadcast by DDP before the first step
    np.testing.assert_array_equal(weight.value(0, worker="worker_0"), weight.value(0, worker="worker_1"))
    grads = trial.tensor("gradient/Lit_fc.weight")  # each rank's local gradient (its own batch)
    assert not np.array_equal(grads.value(0, worker="worker_0"), grads.value(0, worker="worker_1"))
