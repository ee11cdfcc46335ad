"""Spot-training restarts: step counters recorded beside the checkpoints and resumed."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from _pytorch_support import MLP
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.hooks import training_state
from smdebug_lite.trials import create_trial

torch.set_num_threads(1)


@pytest.fixture
def checkpoint_dir(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    config = tmp_path / "checkpointconfig.json"
    config.write_text(json.dumps({"LocalPath": str(ckpt), "S3Uri": "s3://bucket/ckpt"}))
    monkeypatch.setenv(training_state.CHECKPOINT_CONFIG_ENV, str(config))
    monkeypatch.setattr(training_state, "CHECK_INTERVAL_S", 0.0)  # look at every step
    return ckpt


@pytest.fixture
def warnings_seen():
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logging.getLogger("smdebug_lite").addHandler(handler)
    yield records
    logging.getLogger("smdebug_lite").removeHandler(handler)


def _train(hook, model, steps, eval_steps=0, checkpoint_after=None, ckpt=None) -> list[float]:
    """TRAIN steps (EVAL steps and a checkpoint after TRAIN step `checkpoint_after`); returns
    the loss of each TRAIN step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for i in range(steps):
        hook.set_mode(smd.modes.TRAIN)
        loss = loss_fn(model(torch.randn(4, 6)), torch.randint(0, 3, (4,)))
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i == checkpoint_after:
            hook.set_mode(smd.modes.EVAL)
            for _ in range(eval_steps):
                model(torch.randn(4, 6))
            torch.save(model.state_dict(), ckpt / "model.pt")
    return losses


def test_a_restarted_job_continues_the_step_numbers(tmp_path, checkpoint_dir, monkeypatch):
    monkeypatch.setenv("TRAINING_JOB_NAME", "spot-job")  # the platform writes the end marker
    out = tmp_path / "run"
    loss = "CrossEntropyLoss_output_0"
    # First run: 6 TRAIN steps, with 2 EVAL steps and a checkpoint after TRAIN step 3; then the
    # instance is reclaimed.
    first = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                     include_collections=["losses"])
    first_losses = _train(first, MLP(), steps=6, eval_steps=2, checkpoint_after=3,
                          ckpt=checkpoint_dir)
    first.close()
    states = json.loads((checkpoint_dir / "metadata.json").read_text())
    # Noticed when the next step began: global steps 0-3 TRAIN and 4-5 EVAL were done.
    assert states == [{"training-run": 0, "latest-global-step-saved": 3,
                       "latest-global-step-seen": 5,
                       "latest-mode-step": {"GLOBAL": 5, "TRAIN": 3, "EVAL": 1}}]

    # Second run: the script reloads the checkpoint and trains on; a new hook resumes there, so
    # the redone TRAIN steps 4 and 5 replace the lost ones and steps 0-3 are kept.
    model = MLP()
    model.load_state_dict(torch.load(checkpoint_dir / "model.pt"))
    second = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                      include_collections=["losses"])
    second_losses = _train(second, model, steps=3)
    second.close()

    trial = create_trial(str(out))
    assert trial.steps(mode=smd.modes.TRAIN) == list(range(7))
    assert trial.steps() == [0, 1, 2, 3, 6, 7, 8]  # global steps; 4-5 were EVAL (no loss)
    expected = first_losses[:4] + second_losses
    for step, value in enumerate(expected):
        got = float(trial.tensor(loss).value(step, mode=smd.modes.TRAIN))
        assert got == pytest.approx(value, rel=1e-6), step
    states = json.loads((checkpoint_dir / "metadata.json").read_text())
    assert [s["training-run"] for s in states] == [0]  # no checkpoint written in run 2


def test_without_checkpoint_config_nothing_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv(training_state.CHECKPOINT_CONFIG_ENV, str(tmp_path / "absent.json"))
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1))
    assert hook.training_state is None
    _train(hook, MLP(), steps=2)
    hook.close()
    assert trial_steps(tmp_path / "run") == [0, 1]


def trial_steps(out):
    return create_trial(str(out)).steps()


@pytest.mark.parametrize("content", ["{not json", json.dumps({"a": 1}),
                                     json.dumps([{"training-run": 0}])])
def test_a_bad_metadata_file_is_named_and_counting_starts_at_zero(tmp_path, checkpoint_dir,
                                                                   warnings_seen, content):
    (checkpoint_dir / "metadata.json").write_text(content)
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1))
    _train(hook, MLP(), steps=2)
    hook.close()
    assert trial_steps(tmp_path / "run") == [0, 1]
    assert any("metadata.json" in r.getMessage() for r in warnings_seen)


@pytest.mark.parametrize("content, says", [
    (json.dumps({"S3Uri": "s3://bucket/ckpt"}), "LocalPath"),
    (json.dumps({"LocalPath": 5}), "LocalPath=5"),
    ("{not json", "a readable JSON object"),
    ("[1]", "a JSON object, got list"),
])
def test_a_bad_checkpoint_config_is_named(tmp_path, monkeypatch, warnings_seen, content, says):
    config = tmp_path / "checkpointconfig.json"
    config.write_text(content)
    monkeypatch.setenv(training_state.CHECKPOINT_CONFIG_ENV, str(config))
    hook = smd.Hook(str(tmp_path / "run"))
    hook.close()
    assert hook.training_state is None
    assert any(says in r.getMessage() and str(config) in r.getMessage()
               and "step counters will not be kept" in r.getMessage() for r in warnings_seen)


def test_a_checkpoint_after_the_last_step_is_recorded_at_close(tmp_path, checkpoint_dir,
                                                               monkeypatch):
    monkeypatch.setattr(training_state, "CHECK_INTERVAL_S", 1000.0)  # no look during training
    hook = smd.Hook(str(tmp_path / "run"), save_config=smd.SaveConfig(save_interval=1))
    model = MLP()
    _train(hook, model, steps=3)
    torch.save(model.state_dict(), checkpoint_dir / "model.pt")  # at the end of the epoch
    assert not (checkpoint_dir / "metadata.json").exists()
    hook.close()
    (state,) = json.loads((checkpoint_dir / "metadata.json").read_text())
    assert state["latest-global-step-seen"] == 2 and state["latest-mode-step"]["TRAIN"] == 2


def test_the_metadata_file_keeps_the_newest_states_only(tmp_path, checkpoint_dir, monkeypatch):
    monkeypatch.setattr(training_state, "KEEP_STATES", 3)
    state = training_state.TrainingState(str(checkpoint_dir))
    for step in range(5):
        state.record(step, {smd.modes.TRAIN: step}, step)
    kept = json.loads((checkpoint_dir / "metadata.json").read_text())
    assert [s["latest-global-step-seen"] for s in kept] == [2, 3, 4]
    assert training_state.TrainingState(str(checkpoint_dir)).resume_counters() == (
        4, {smd.modes.TRAIN: 4}, 4)
