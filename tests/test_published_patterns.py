"""The idioms of the published SageMaker Debugger examples, on tiny real training runs.

Each test writes, in its own code, the shape of what those programs do through ``import smdebug``:
a hook built from DebugHookConfig JSON, a ``smd.Hook`` subclass overriding ``forward_hook``, a
custom ``Rule`` subclass, and the notebook queries (``tensor_names(collection=...)``,
``tensor(name).steps/value(mode=...)``, XGBoost's ``full_shap`` matrix sliced ``[:, :-1]``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import smdebug.pytorch as smd
import torch
from gradient_rule import GradientMagnitude
from smdebug import modes
from smdebug.exceptions import RuleEvaluationConditionMet
from smdebug.rules.rule import Rule
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.trials import create_trial
from torch import nn

torch.set_num_threads(1)


def _hook_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collections: dict) -> Path:
    """What SageMaker writes for a DebuggerHookConfig, pointed to by the documented variable."""
    out_dir = tmp_path / "trial"
    config = {
        "LocalPath": str(out_dir),
        "CollectionConfigurations": [
            {"CollectionName": name, "CollectionParameters": params}
            for name, params in collections.items()
        ],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(path))
    return out_dir


class _Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn(self.conv(x)))
        return torch.log_softmax(self.fc(torch.flatten(x, 1)), dim=1)


def _train_and_eval(
    hook_cls: type[smd.Hook],
    train_steps: int,
    eval_steps: int,
    register: str = "register_module",
) -> None:
    """The example scripts' body: a hook from the JSON config with the model (registered by the
    method the script names) and the loss, then their train()/test() pair of set_mode and plain
    loops, and close."""
    model, loss_fn = _Classifier(), nn.NLLLoss()
    hook = hook_cls.create_from_json_file()
    getattr(hook, register)(model)
    hook.register_loss(loss_fn)
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.set_mode(modes.TRAIN)
    model.train()
    for _ in range(train_steps):
        x, y = torch.randn(4, 1, 8, 8, requires_grad=True), torch.randint(0, 3, (4,))
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.set_mode(modes.EVAL)
    model.eval()
    for _ in range(eval_steps):
        x, y = torch.randn(4, 1, 8, 8, requires_grad=True), torch.randint(0, 3, (4,))
        if hasattr(hook, "image_gradients"):
            hook.image_gradients(x)
        out = model(x)
        loss_fn(out, y)
        out.max(dim=1).values.sum().backward()
    hook.close()


def test_hook_from_json_file_and_notebook_mode_queries(tmp_path, monkeypatch):
    out_dir = _hook_json(
        tmp_path, monkeypatch, {"losses": {"save_interval": "1"}, "weights": {"save_interval": "2"}}
    )
    _train_and_eval(smd.Hook, train_steps=4, eval_steps=2, register="register_hook")

    from smdebug.core.modes import ModeKeys

    trial = create_trial(str(out_dir))
    assert "NLLLoss_output_0" in trial.tensor_names(collection="losses")
    assert trial.tensor_names(collection="weights")
    loss = trial.tensor("NLLLoss_output_0")
    assert loss.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3]
    assert loss.steps(mode=ModeKeys.EVAL) == [0, 1]
    vals = [loss.value(s, mode=ModeKeys.EVAL) for s in loss.steps(mode=ModeKeys.EVAL)]
    assert all(np.shape(v) == () and np.isfinite(v) for v in vals)
    assert trial.steps(mode=modes.TRAIN) == [0, 1, 2, 3]


class _SaliencyHook(smd.Hook):
    """The class-activation-map example's shape: own forward_hook and an image gradient."""

    def image_gradients(self, image: torch.Tensor) -> None:
        image.register_hook(self.backward_hook("image"))

    def forward_hook(self, module, inputs, outputs):
        name = module._module_name
        self._write_inputs(name, inputs)
        if self.mode == modes.EVAL:
            outputs.register_hook(self.backward_hook(name + "_output"))
            if isinstance(module, nn.BatchNorm2d):
                self._write_outputs(name + ".running_mean", module.running_mean)
        self._write_outputs(name, outputs)
        self.last_saved_step = self.step


def test_hook_subclass_overriding_forward_hook(tmp_path, monkeypatch):
    out_dir = _hook_json(
        tmp_path,
        monkeypatch,
        {
            "custom_collection": {
                "include_regex": ".*bn|.*relu|.*image|.*_Classifier_input|.*NLLLoss",
                "train.save_interval": "100",
                "eval.save_interval": "1",
            }
        },
    )
    _train_and_eval(_SaliencyHook, train_steps=2, eval_steps=2)

    trial = create_trial(str(out_dir))
    names = set(trial.tensor_names())
    for wanted in (
        "_Classifier_input_0",
        "bn_output_0",
        "bn.running_mean_output_0",
        "gradient/bn_output",
        "gradient/image",
    ):
        assert wanted in names, (wanted, sorted(names))
    assert trial.steps(mode=modes.EVAL) == [0, 1]
    image_grad = trial.tensor("gradient/image").value(step_num=1, mode=modes.EVAL)
    assert image_grad.shape == (4, 1, 8, 8)
    assert trial.tensor("bn.running_mean_output_0").value(0, mode=modes.EVAL).shape == (4,)


class _EvalAccuracyDrop(Rule):
    """The pruning example's rule: maps a global step to (mode, mode step) itself."""

    def __init__(self, base_trial, previous_accuracy=1.0, threshold=0.05):
        super().__init__(base_trial)
        self.previous_accuracy = float(previous_accuracy)
        self.threshold = float(threshold)
        self.correct = self.samples = 0

    def invoke_at_step(self, step):
        mode, mode_step = self.base_trial._global_to_mode[step]
        if mode != modes.EVAL:
            return False
        predicted = self.base_trial.tensor("NLLLoss_input_0").value(mode_step, mode=modes.EVAL)
        labels = self.base_trial.tensor("NLLLoss_input_1").value(mode_step, mode=modes.EVAL)
        self.correct += int(np.sum(np.argmax(predicted, axis=1) == labels))
        self.samples += labels.shape[0]
        self.logger.info("step %s: accuracy %s", step, self.correct / self.samples)
        return self.previous_accuracy - self.correct / self.samples > self.threshold


@pytest.fixture
def torch_trial(tmp_path, monkeypatch):
    out_dir = _hook_json(
        tmp_path,
        monkeypatch,
        {
            "gradients": {"save_interval": "1"},
            "predictions": {"include_regex": "NLLLoss_input_.*", "save_interval": "1"},
        },
    )
    _train_and_eval(smd.Hook, train_steps=3, eval_steps=2)
    return create_trial(str(out_dir))


def test_custom_rule_subclass_with_collection_and_abs_reduction(torch_trial):
    assert torch_trial.tensor_names(collection="gradients")
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(GradientMagnitude(torch_trial, threshold="0.0"), raise_eval_cond=True)
    invoke_rule(GradientMagnitude(torch_trial, threshold="1e9"), raise_eval_cond=True)


def test_custom_rule_reading_eval_steps_through_global_to_mode(torch_trial):
    rule = _EvalAccuracyDrop(torch_trial, previous_accuracy="0.0")
    invoke_rule(rule, raise_eval_cond=True)
    assert rule.samples == 8  # both EVAL batches were read
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(_EvalAccuracyDrop(torch_trial, previous_accuracy="2.0"), raise_eval_cond=True)


def test_xgboost_full_shap_matrix_and_notebook_queries(tmp_path):
    xgb = pytest.importorskip("xgboost")
    import smdebug.xgboost as smx

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    y = (x[:, 0] - x[:, 2] > 0).astype(int)
    dtrain = xgb.DMatrix(x, label=y)
    every_2 = smd.SaveConfig(save_interval=2)
    hook = smx.Hook(
        out_dir=str(tmp_path / "trial"),
        include_collections=["metrics", "feature_importance", "full_shap", "average_shap"],
        save_config=every_2,
        train_data=dtrain,
    )
    params = {"max_depth": 2, "objective": "binary:logistic", "nthread": 1}
    booster = xgb.train(
        params, dtrain, num_boost_round=5, evals=[(dtrain, "train")], callbacks=[hook]
    )
    hook.close()

    trial = create_trial(str(tmp_path / "trial"))
    assert "average_shap/f1" in trial.tensor_names()
    assert set(trial.tensor("average_shap/f1").values()) == {0, 2, 4}
    assert trial.collection("feature_importance").tensor_names
    assert trial.collection("metrics").tensor_names

    shap_values = trial.tensor("full_shap/f0").value(trial.last_complete_step)
    shap_no_base, base = shap_values[:, :-1], shap_values[0, -1]
    assert shap_no_base.shape == (60, 3)
    margin = booster.predict(dtrain, output_margin=True)
    np.testing.assert_allclose(shap_no_base.sum(axis=1) + base, margin, rtol=1e-4, atol=1e-4)
