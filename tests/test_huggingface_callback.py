"""smdebug_lite.huggingface.DebuggerCallback in real Trainer runs: a small BERT classifier
built from a config (no downloads), trained, evaluated and asked to predict, checked against
what the Trainer logged and what the model held."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from _pytorch_support import read_with_our_trial, read_with_smdebug, ref_available  # noqa: E402
from lazy_module import lazy, require_module  # noqa: E402

import smdebug_lite as smd  # noqa: E402
import smdebug_lite.pytorch as smd_torch  # noqa: E402
from smdebug_lite.rules import invoke_rule  # noqa: E402
from smdebug_lite.rules.builtin import get_builtin_rule  # noqa: E402
from smdebug_lite.trials import create_trial  # noqa: E402

require_module("transformers", "accelerate")  # the Trainer needs accelerate
transformers = lazy("transformers")
smd_hf = lazy("smdebug_lite.huggingface")

torch.set_num_threads(1)
TRAIN, EVAL, PREDICT = smd.modes.TRAIN, smd.modes.EVAL, smd.modes.PREDICT
LR, STEPS = 1e-3, 6
WEIGHT = "BertForSequenceClassification_classifier.weight"


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, 50, (n, 8), generator=g)
        self.y = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.x[i], "labels": self.y[i]}


def _recorder():
    """A callback recording the classifier's weights as each optimizer step begins, and its
    gradient before the update (no clipping in these runs); built here because its base class
    comes from transformers, imported on first use."""

    class Recorder(transformers.TrainerCallback):
        def __init__(self) -> None:
            self.weights: list[np.ndarray] = []
            self.grads: list[np.ndarray] = []

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            self.weights.append(model.classifier.weight.detach().numpy().copy())

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            self.grads.append(model.classifier.weight.grad.detach().numpy().copy())

    return Recorder()


def _model() -> transformers.BertForSequenceClassification:
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=2))


def _args(tmp, **kwargs) -> transformers.TrainingArguments:
    base = dict(output_dir=str(tmp / "hf"), per_device_train_batch_size=4,
                per_device_eval_batch_size=4, num_train_epochs=1, learning_rate=LR,
                logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                disable_tqdm=True, max_grad_norm=0.0, seed=0)
    return transformers.TrainingArguments(**{**base, **kwargs})


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for var in ("SMDEBUG_CONFIG_FILE_PATH", "USE_SMDEBUG", "TRAINING_JOB_NAME"):
        monkeypatch.delenv(var, raising=False)
    smd_torch.del_hook()
    yield
    smd_torch.del_hook()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """train (evaluating at the epoch's end), evaluate again, predict; every 2nd step saved."""
    tmp = tmp_path_factory.mktemp("hf")
    out_dir = str(tmp / "trial")
    cb = smd_hf.DebuggerCallback(out_dir, save_config=smd.SaveConfig(save_interval=2),
                          include_collections=["weights", "gradients", "losses"])
    recorder = _recorder()
    trainer = transformers.Trainer(model=_model(), args=_args(tmp, eval_strategy="epoch"),
                      train_dataset=Tokens(4 * STEPS, 0), eval_dataset=Tokens(4, 1),
                      callbacks=[cb, recorder])
    trainer.train()
    trainer.evaluate()
    with cb.predicting():
        trainer.predict(Tokens(8, 2))
    cb.close()
    return out_dir, trainer, recorder


def _value(trial, name: str, step: int, mode) -> float | np.ndarray:
    v = np.asarray(trial.tensor(name).value(step, mode=mode))
    return float(v.reshape(-1)[0]) if v.size == 1 else v


def test_steps_follow_the_trainer_loops(run):
    trial = create_trial(run[0])
    # every training step logs (logging_steps=1), so each is a step of the trial; tensors every 2nd
    assert trial.steps(mode=TRAIN) == list(range(STEPS))
    assert trial.tensor(WEIGHT).steps(mode=TRAIN) == [0, 2, 4]
    assert trial.steps(mode=EVAL) == [0, 1]  # one batch per evaluation
    assert trial.tensor(WEIGHT).steps(mode=EVAL) == [0]
    assert trial.steps(mode=PREDICT) == [0, 1]  # in `predicting()`
    assert "gradient/" + WEIGHT in trial.tensor_names(step=0, mode=TRAIN)
    assert "gradient/" + WEIGHT not in trial.tensor_names(step=0, mode=EVAL)


def test_losses_rates_and_logs_are_what_the_trainer_logged(run):
    out_dir, trainer, _ = run
    trial = create_trial(out_dir)
    logged = {h["step"]: h for h in trainer.state.log_history if "loss" in h}
    assert sorted(logged) == list(range(1, STEPS + 1))
    for s in range(STEPS):  # Trainer step s+1 is the hook's TRAIN step s
        assert _value(trial, "scalar/loss", s, TRAIN) == logged[s + 1]["loss"]
        assert _value(trial, "scalar/learning_rate", s, TRAIN) == logged[s + 1]["learning_rate"]
        if s % 2 == 0:
            assert _value(trial, "loss_output_0", s, TRAIN) == pytest.approx(logged[s + 1]["loss"], rel=1e-7)
            # the linear schedule's rate for this update, in both parameter groups
            expected = LR * (STEPS - s) / STEPS
            assert _value(trial, "scalar/lr/0", s, TRAIN) == pytest.approx(expected, rel=1e-12)
            assert _value(trial, "scalar/lr/1", s, TRAIN) == pytest.approx(expected, rel=1e-12)
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert len(evals) == 2
    assert _value(trial, "loss_output_0", 0, EVAL) == pytest.approx(evals[0], rel=1e-6)
    assert [_value(trial, "scalar/eval_loss", s, EVAL) for s in (0, 1)] == evals
    assert "scalar/test_loss" in trial.tensor_names(step=1, mode=PREDICT)


def test_weights_and_gradients_are_the_models(run):
    out_dir, _, recorder = run
    trial = create_trial(out_dir)
    for s in (0, 2, 4):
        np.testing.assert_array_equal(_value(trial, WEIGHT, s, TRAIN), recorder.weights[s])
        np.testing.assert_array_equal(_value(trial, "gradient/" + WEIGHT, s, TRAIN), recorder.grads[s])


def test_rules_run_on_the_trial(run):
    trial = create_trial(run[0])
    assert invoke_rule(get_builtin_rule("ExplodingTensor")(trial)).status == "NoIssuesFound"
    vanishing = get_builtin_rule("VanishingGradient")(trial, threshold="1e9")
    assert invoke_rule(vanishing).status == "IssuesFound"  # the gradients were read


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


def test_configured_from_the_debughookconfig_json(tmp_path, monkeypatch):
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({
        "S3OutputPath": "s3://bucket/prefix", "LocalPath": str(tmp_path / "from_env"),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": "gradients"}]}))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config))
    cb = smd_hf.DebuggerCallback()  # no out_dir: from the JSON, as the hooks' get_hook does
    transformers.Trainer(model=_model(), args=_args(tmp_path, max_steps=2, logging_steps=100),
            train_dataset=Tokens(8, 0), callbacks=[cb]).train()
    cb.close()
    trial = create_trial(str(tmp_path / "from_env"))
    assert trial.tensor("gradient/" + WEIGHT).steps(mode=TRAIN) == [0, 1]
