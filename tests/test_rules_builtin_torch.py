"""Built-in rules on real PyTorch training saved by our hook: each rule in a situation that must
trigger it (status and step asserted, the step derived from what the training loop saw) and in a
healthy one that must not."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from test_rules_helpers import fixed_batches, train_torch
from torch import nn
from waiting import wait_until

from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import (
    AllZero,
    CheckInputImages,
    ClassImbalance,
    Confusion,
    DeadRelu,
    ExplodingTensor,
    LossNotDecreasing,
    NLPSequenceRatio,
    Overfit,
    Overtraining,
    PoorWeightInitialization,
    SaturatedActivation,
    SimilarAcrossRuns,
    StalledTrainingRule,
    TensorVariance,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
)
from smdebug_lite.trials import create_trial

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "0.05")
    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.05")
    torch.manual_seed(0)


def _run(rule):
    return invoke_rule(rule)


def _trial(log):
    return create_trial(log.out_dir, timeout=30)


def _mlp(sizes, act=nn.ReLU):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.Sequential(*layers)


class Block(nn.Module):
    """Linear + a named activation, so tensors are called `<block>.<act>_{input,output}_0`."""

    def __init__(self, i, o, act="relu"):
        super().__init__()
        self.fc = nn.Linear(i, o)
        setattr(self, act, {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[act]())
        self.act = act

    def forward(self, x):
        return getattr(self, self.act)(self.fc(x))


class Net(nn.Module):
    def __init__(self, sizes, act="relu", n_out=3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a, b, act) for a, b in zip(sizes[:-1], sizes[1:],
                                                                     strict=False))
        self.out = nn.Linear(sizes[-1], n_out)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def _classification(n=64, d=8, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, k, generator=g)
    return x, (x @ w).argmax(dim=1)


def _regression(n=64, d=8, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return x, (x @ torch.randn(d, 1, generator=g)) * scale


# -- VanishingGradient ---------------------------------------------------------------------------


def _min_grad_abs_mean(hook, model, x, y, out, loss):
    return {"min_abs_mean": min(float(p.grad.abs().mean()) for p in model.parameters())}


def test_vanishing_gradient_deep_sigmoid_mlp(tmp_path):
    model = _mlp([8] + [16] * 20 + [3], act=nn.Sigmoid)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), steps=4,
                      on_train_step=_min_grad_abs_mean)
    expected = log.first(lambda f: f["min_abs_mean"] < 1e-7)
    assert expected == 0
    res = _run(VanishingGradient(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", expected)


def test_vanishing_gradient_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 32, 32, 3]),
                      fixed_batches(*_classification()), steps=6)
    res = _run(VanishingGradient(_trial(log)))
    assert (res.status, res.steps_evaluated) == ("NoIssuesFound", 6)


# -- ExplodingTensor -----------------------------------------------------------------------------


def _nonfinite(hook, model, x, y, out, loss):
    tensors = [loss] + [p for p in model.parameters()] + [p.grad for p in model.parameters()]
    return {"bad": any(not bool(torch.isfinite(t).all()) for t in tensors),
            "loss_bad": not bool(torch.isfinite(loss))}


def test_exploding_tensor_lr_1e4(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 1]), fixed_batches(*_regression()),
                      loss_fn=nn.MSELoss(), lr=1e4, steps=12, on_train_step=_nonfinite)
    expected = log.first(lambda f: f["bad"])
    assert expected is not None and expected > 0
    res = _run(ExplodingTensor(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", expected)
    # Restricted to the losses collection, it fires where the loss itself is not finite.
    expected_loss = log.first(lambda f: f["loss_bad"])
    res = _run(ExplodingTensor(_trial(log), collection_names="losses"))
    assert (res.status, res.step) == ("IssuesFound", expected_loss)


def test_exploding_tensor_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 1]), fixed_batches(*_regression()),
                      loss_fn=nn.MSELoss(), lr=0.01, steps=12)
    assert _run(ExplodingTensor(_trial(log))).status == "NoIssuesFound"


# -- LossNotDecreasing ---------------------------------------------------------------------------


def test_loss_not_decreasing_lr_0(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.0, steps=25)
    res = _run(LossNotDecreasing(_trial(log)))
    # The first check compares TRAIN step 10 with step 0: no decrease at all.
    assert (res.status, res.step) == ("IssuesFound", 10)


def test_loss_not_decreasing_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 32, 3]), fixed_batches(*_classification()),
                      lr=0.2, steps=31)
    assert all(b < a for a, b in zip(log.losses, log.losses[1:], strict=False))
    res = _run(LossNotDecreasing(_trial(log)))
    assert (res.status, res.steps_evaluated) == ("NoIssuesFound", 31)


def test_loss_not_decreasing_prefers_eval_mode(tmp_path):
    # Training improves, then a long evaluation on a fixed batch: the EVAL loss is constant.
    log = train_torch(str(tmp_path / "run"), _mlp([8, 32, 3]), fixed_batches(*_classification()),
                      lr=0.2, phases=[(TRAIN, 21), (EVAL, 12)])
    res = _run(LossNotDecreasing(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 21 + 10)
    assert _run(LossNotDecreasing(_trial(log), mode="TRAIN")).status == "NoIssuesFound"


# -- Overfit ---------------------------------------------------------------------------------------


def _expected_overfit(log, ratio_threshold=0.1, patience=1):
    """Straight re-statement of the documented criterion over the losses the loop saw."""
    train, train_mean, evals, in_eval, exceeded = [], None, [], False, 0
    for step, (mode, loss) in enumerate(zip(log.modes, log.losses, strict=True)):
        if mode == TRAIN:
            if in_eval:
                in_eval, train = False, []
            train.append(loss)
            continue
        if not in_eval:
            in_eval, evals, train_mean = True, [], float(np.mean(train))
        evals.append(loss)
        if (np.mean(evals) - train_mean) / abs(train_mean) > ratio_threshold:
            exceeded += 1
            if exceeded >= patience:
                return step
        else:
            exceeded = 0
    return None


def _cycles(n, train_steps=5, eval_steps=2):
    return [(m, k) for _ in range(n) for m, k in ((TRAIN, train_steps), (EVAL, eval_steps))]


def test_overfit_memorizing_random_labels(tmp_path):
    g = torch.Generator().manual_seed(1)
    xt, yt = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
    xv, yv = torch.randn(64, 8, generator=g), torch.randint(0, 4, (64,), generator=g)
    log = train_torch(str(tmp_path / "run"), _mlp([8, 64, 64, 4]),
                      lambda mode, i: (xt, yt) if mode == TRAIN else (xv, yv),
                      optimizer="adam", lr=0.01, phases=_cycles(6))
    expected = _expected_overfit(log)
    assert expected is not None and log.modes[expected] == EVAL
    res = _run(Overfit(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", expected)
    # patience counts consecutive EVAL steps above the threshold
    expected2 = _expected_overfit(log, patience=2)
    res = _run(Overfit(_trial(log), patience="2"))
    assert (res.status, res.step) == ("IssuesFound", expected2)


def test_overfit_healthy(tmp_path):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(8, 1, generator=g)

    def batches(mode, i):
        gg = torch.Generator().manual_seed(1000 * (mode == EVAL) + i)
        x = torch.randn(128, 8, generator=gg)
        return x, x @ w

    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 1]), batches, loss_fn=nn.MSELoss(),
                      lr=0.05, phases=_cycles(5))
    assert _expected_overfit(log) is None
    assert _run(Overfit(_trial(log))).status == "NoIssuesFound"


# -- Overtraining ----------------------------------------------------------------------------------


def test_overtraining_lr_0(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.0, steps=10)
    res = _run(Overtraining(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 5)  # best at 0, no improvement for 5 steps


def test_overtraining_validation_plateau(tmp_path):
    # Training improves; evaluation on a frozen model gives the same loss for 12 steps.
    log = train_torch(str(tmp_path / "run"), _mlp([8, 32, 1]), fixed_batches(*_regression(scale=5)),
                      loss_fn=nn.MSELoss(), lr=0.02, phases=[(TRAIN, 10), (EVAL, 12)])
    res = _run(Overtraining(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 10 + 10)


def test_overtraining_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 32, 1]), fixed_batches(*_regression(scale=5)),
                      loss_fn=nn.MSELoss(), lr=0.02, steps=20)
    assert _run(Overtraining(_trial(log))).status == "NoIssuesFound"


# -- TensorVariance -------------------------------------------------------------------------------


def _weight_vars(hook, model, x, y, out, loss):
    return {"max_var": max(float(p.detach().double().var(unbiased=False))
                           for n, p in model.named_parameters() if n.endswith("weight"))}


def test_tensor_variance_growing_weights(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 1]),
                      fixed_batches(*_regression(scale=10)), loss_fn=nn.MSELoss(), lr=0.05,
                      steps=12, on_train_step=_weight_vars)
    expected = log.first(lambda f: f["max_var"] > 1.0)
    assert expected is not None and expected > 0
    res = _run(TensorVariance(_trial(log), collection_names="weights", max_threshold="1.0"))
    assert (res.status, res.step) == ("IssuesFound", expected)


def test_tensor_variance_min_threshold_and_healthy(tmp_path):
    model = _mlp([8, 16, 3])
    nn.init.zeros_(model[0].weight)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), lr=0.0,
                      steps=3)
    res = _run(TensorVariance(_trial(log), collection_names="weights", min_threshold="1e-6"))
    assert (res.status, res.step) == ("IssuesFound", 0)

    log = train_torch(str(tmp_path / "ok"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.01, steps=5)
    rule = TensorVariance(_trial(log), collection_names="weights", max_threshold="1.0",
                          min_threshold="1e-6")
    assert _run(rule).status == "NoIssuesFound"


# -- AllZero ------------------------------------------------------------------------------------------


def test_all_zero_gradients_of_a_zero_layer(tmp_path):
    model = _mlp([8, 16, 3])
    nn.init.zeros_(model[0].weight)
    nn.init.zeros_(model[0].bias)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), steps=3)
    res = _run(AllZero(_trial(log), collection_names="gradients"))
    assert (res.status, res.step) == ("IssuesFound", 0)
    assert AllZero(_trial(log), tensor_regex="gradient/.*", threshold="100")


def test_all_zero_healthy_and_needs_a_selection(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      steps=3)
    assert _run(AllZero(_trial(log), collection_names="gradients,weights")).status == \
        "NoIssuesFound"
    with pytest.raises(ValueError, match="collection_names or tensor_regex"):
        AllZero(_trial(log))


# -- WeightUpdateRatio -------------------------------------------------------------------------------


def test_weight_update_ratio_lr_0(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.0, steps=4)
    res = _run(WeightUpdateRatio(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 1)  # first step with a previous one


def test_weight_update_ratio_too_large(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 1]),
                      fixed_batches(*_regression(scale=100)), loss_fn=nn.MSELoss(), lr=1.0,
                      steps=4)
    rule = WeightUpdateRatio(_trial(log))
    res = _run(rule)
    assert (res.status, res.step) == ("IssuesFound", 1)
    assert rule.report["Details"]["ratio"] > 10.0


def test_weight_update_ratio_healthy_with_num_steps(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.01, phases=[(TRAIN, 6), (EVAL, 3), (TRAIN, 4)])
    assert _run(WeightUpdateRatio(_trial(log))).status == "NoIssuesFound"
    res = _run(WeightUpdateRatio(_trial(log), num_steps="2"))
    assert res.status == "NoIssuesFound" and res.steps_evaluated == 13


# -- UnchangedTensor -----------------------------------------------------------------------------------


def test_unchanged_tensor_lr_0(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.0, steps=6)
    res = _run(UnchangedTensor(_trial(log), collection_names="weights"))
    assert (res.status, res.step) == ("IssuesFound", 2)  # steps 0, 1, 2 all equal
    res = _run(UnchangedTensor(_trial(log), tensor_regex=".*out.*weight|.*2.weight",
                               num_steps="5"))
    assert (res.status, res.step) == ("IssuesFound", 4)


def test_unchanged_tensor_healthy_and_eval_ignored(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 3]), fixed_batches(*_classification()),
                      lr=0.05, phases=[(TRAIN, 5), (EVAL, 5), (TRAIN, 3)])
    assert _run(UnchangedTensor(_trial(log), collection_names="weights")).status == \
        "NoIssuesFound"


# -- PoorWeightInitialization ----------------------------------------------------------------------------


def test_poor_weight_initialization_exploding_variance(tmp_path):
    model = Net([8, 32, 32, 32], act="relu")
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=1.0)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), lr=1e-4,
                      steps=4, include_regex=[".*relu_input"])
    res = _run(PoorWeightInitialization(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 0)


def test_poor_weight_initialization_healthy_kaiming(tmp_path):
    model = Net([8, 32, 32, 32], act="relu")
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification(n=128)),
                      lr=0.05, steps=12, include_regex=[".*relu_input"])
    res = _run(PoorWeightInitialization(_trial(log)))
    assert (res.status, res.steps_evaluated) == ("NoIssuesFound", 12)


# -- SaturatedActivation / DeadRelu ---------------------------------------------------------------------


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
def test_saturated_activation_huge_init(tmp_path, act):
    model = Net([8, 32, 32], act=act)
    nn.init.normal_(model.blocks[0].fc.weight, std=1000.0)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), lr=0.0,
                      steps=3, include_regex=[f".*{act}_input"])
    res = _run(SaturatedActivation(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 0)


def test_saturated_activation_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), Net([8, 32, 32], act="tanh"),
                      fixed_batches(*_classification()), steps=3,
                      include_regex=[".*tanh_input", ".*sigmoid_input"])
    assert _run(SaturatedActivation(_trial(log))).status == "NoIssuesFound"


def test_dead_relu_negative_bias_init(tmp_path):
    model = Net([8, 32, 32], act="relu")
    nn.init.constant_(model.blocks[1].fc.bias, -100.0)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), steps=3,
                      include_regex=[".*relu_output"])
    res = _run(DeadRelu(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 0)


def test_dead_relu_healthy(tmp_path):
    log = train_torch(str(tmp_path / "run"), Net([8, 32, 32], act="relu"),
                      fixed_batches(*_classification()), steps=3, include_regex=[".*relu_output"])
    assert _run(DeadRelu(_trial(log))).status == "NoIssuesFound"


# -- ClassImbalance / Confusion (labels and predictions saved with hook.save_tensor) ---------------------


def _save_labels_predictions(hook, model, x, y, out, loss):
    hook.save_tensor("labels", y, "labels")
    hook.save_tensor("predictions", out.detach().argmax(dim=1), "predictions")
    return {}


def _imbalanced(mode, i, minority=3):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(64, 8, generator=g)
    y = torch.zeros(64, dtype=torch.long)
    y[:minority] = 1
    x[:minority] += 2.0
    return x, y


def test_class_imbalance_imbalanced_labels(tmp_path):
    log = train_torch(str(tmp_path / "run"), _mlp([8, 16, 2]), _imbalanced, steps=10,
                      on_train_step=_save_labels_predictions)
    res = _run(ClassImbalance(_trial(log)))
    # 8 steps of 64 labels reach samples=500; the counts are 61:3 per step.
    assert (res.status, res.step) == ("IssuesFound", 7)


def test_class_imbalance_mispredictions_and_healthy(tmp_path):
    x, y = _classification(n=64, k=2)
    model = _mlp([8, 16, 2])
    with torch.no_grad():  # a classifier that always answers class 0
        model[-1].weight.zero_()
        model[-1].bias.copy_(torch.tensor([5.0, -5.0]))
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(x, y), lr=0.0, steps=10,
                      on_train_step=_save_labels_predictions)
    counts = torch.bincount(y, minlength=2)
    assert counts.max() / counts.min() < 10
    res = _run(ClassImbalance(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 7)

    trained = _mlp([8, 32, 2])
    log = train_torch(str(tmp_path / "ok"), trained, fixed_batches(x, y), lr=0.5,
                      phases=[(TRAIN, 40), (EVAL, 10)], on_eval_step=_save_labels_predictions)
    assert _run(ClassImbalance(_trial(log))).status == "NoIssuesFound"


def test_confusion_untrained_vs_trained(tmp_path):
    x, y = _classification(n=96, k=3)
    log = train_torch(str(tmp_path / "bad"), _mlp([8, 16, 3]), fixed_batches(x, y), lr=0.0,
                      phases=[(EVAL, 3)], on_eval_step=_save_labels_predictions)
    res = _run(Confusion(_trial(log)))
    assert (res.status, res.step) == ("IssuesFound", 0)

    log = train_torch(str(tmp_path / "ok"), _mlp([8, 64, 3]), fixed_batches(x, y), lr=0.5,
                      optimizer="sgd", phases=[(TRAIN, 150), (EVAL, 3)],
                      on_eval_step=_save_labels_predictions)
    assert _run(Confusion(_trial(log), category_no="3")).status == "NoIssuesFound"


# -- CheckInputImages / NLPSequenceRatio --------------------------------------------------------------------


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(4 * 6 * 6, 2)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


def _images(normalized):
    def batches(mode, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(64, 3, 8, 8, generator=g)
        if normalized:
            x = (x - 0.5) / 0.29
        return x, torch.randint(0, 2, (64,), generator=g)

    return batches


@pytest.mark.parametrize("normalized", [False, True])
def test_check_input_images(tmp_path, normalized):
    log = train_torch(str(tmp_path / "run"), ConvNet(), _images(normalized), steps=10,
                      include_regex=["ConvNet_input_0"])
    res = _run(CheckInputImages(_trial(log), regex="ConvNet_input_0"))
    if normalized:
        assert res.status == "NoIssuesFound"
    else:  # 8 batches of 64 images reach threshold_samples=500
        assert (res.status, res.step) == ("IssuesFound", 7)


class TextNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding0 = nn.Embedding(50, 8, padding_idx=0)
        self.head = nn.Linear(8, 2)

    def forward(self, tokens):
        return self.head(self.embedding0(tokens).mean(dim=1))


@pytest.mark.parametrize("padding,fires", [(0.7, True), (0.1, False)])
def test_nlp_sequence_ratio(tmp_path, padding, fires):
    def batches(mode, i):
        g = torch.Generator().manual_seed(i)
        tokens = torch.randint(1, 50, (16, 20), generator=g)
        tokens[:, int(20 * (1 - padding)):] = 0  # right padding
        return tokens, torch.randint(0, 2, (16,), generator=g)

    log = train_torch(str(tmp_path / "run"), TextNet(), batches, steps=3,
                      include_regex=[".*embedding0_input_0"])
    res = _run(NLPSequenceRatio(_trial(log)))
    assert (res.status, res.step) == (("IssuesFound", 0) if fires else ("NoIssuesFound", None))


# -- SimilarAcrossRuns -------------------------------------------------------------------------------------------


def test_similar_across_runs(tmp_path):
    def run(name, lr, seed=0):
        torch.manual_seed(seed)
        return train_torch(str(tmp_path / name), _mlp([8, 16, 3]),
                           fixed_batches(*_classification()), lr=lr, steps=5)

    a, b, c = run("a", 0.1), run("b", 0.1), run("c", 0.5)
    assert _run(SimilarAcrossRuns(_trial(a), other_trials=[_trial(b)])).status == "NoIssuesFound"
    # Same initialization, another learning rate: identical at step 0, different from step 1.
    res = _run(SimilarAcrossRuns(_trial(a), other_trials=c.out_dir, collection_names="weights"))
    assert (res.status, res.step) == ("IssuesFound", 1)
    with pytest.raises(ValueError, match="other_trials"):
        SimilarAcrossRuns(_trial(a))


# -- StalledTrainingRule -------------------------------------------------------------------------------------------


def test_stalled_training_fires_while_training_hangs(tmp_path):
    out = str(tmp_path / "run")
    log = train_torch(out, _mlp([8, 16, 3]), fixed_batches(*_classification()), steps=4,
                      close=False)
    # The steps finished before the hang (0-2; step 3 is still open) reach the disk.
    trial = create_trial(out, timeout=30)
    wait_until(lambda: 2 in trial.steps(), what="step 2 on disk")  # (the writer process's)
    last = max(trial.steps())
    assert last >= 2
    t0 = time.monotonic()
    res = _run(StalledTrainingRule(trial, threshold="0.5"))
    assert (res.status, res.step) == ("IssuesFound", last)
    assert 0.5 <= time.monotonic() - t0 < 10
    log.hook.close()


def test_stalled_training_healthy(tmp_path):
    out = str(tmp_path / "run")
    done = threading.Event()

    def train():
        train_torch(out, _mlp([8, 16, 3]), fixed_batches(*_classification()), steps=8,
                    step_delay=0.1)
        done.set()

    t = threading.Thread(target=train, daemon=True)
    t.start()
    wait_until(lambda: (tmp_path / "run" / "collections").exists(), what="the collections file")
    # (A threshold well above a step's time, however slow a loaded machine makes one.)
    res = _run(StalledTrainingRule(create_trial(out, timeout=30), threshold="30"))
    t.join(60)
    assert done.is_set()
    assert (res.status, res.last_step) == ("NoIssuesFound", 7)


# -- rules on runs that saved only reductions -------------------------------------------------------


def test_rules_use_saved_reductions_when_no_raw_tensor(tmp_path, monkeypatch):
    from smdebug_lite.config import ReductionConfig
    from smdebug_lite.trials import Tensor

    reads = []
    original = Tensor.value

    def counting(self, step_num, mode=ModeKeys.GLOBAL, worker=None):
        out = original(self, step_num, mode=mode, worker=worker)
        reads.append((self.name, step_num))  # successful reads only
        return out

    monkeypatch.setattr(Tensor, "value", counting)
    model = _mlp([8] + [16] * 20 + [3], act=nn.Sigmoid)
    log = train_torch(str(tmp_path / "run"), model, fixed_batches(*_classification()), steps=3,
                      include_collections=["gradients", "weights"],
                      reduction_config=ReductionConfig(reductions=["variance", "max"],
                                                       abs_reductions=["mean"]))
    trial = _trial(log)
    grad = trial.tensor_names(collection="gradients")[0]
    assert trial.tensor(grad).reduction_values(0)  # reductions only, no raw value
    res = _run(VanishingGradient(trial))
    assert (res.status, res.step) == ("IssuesFound", 0)
    res = _run(TensorVariance(trial, collection_names="weights", max_threshold="1e-9"))
    assert (res.status, res.step) == ("IssuesFound", 0)
    assert _run(ExplodingTensor(trial)).status == "NoIssuesFound"
    # Gradients and weights were answered from saved reductions; only the loss (always saved
    # raw) was read.
    assert {name for name, _ in reads} == {"CrossEntropyLoss_output_0"}
