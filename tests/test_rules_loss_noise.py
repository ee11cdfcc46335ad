"""LossNotDecreasing on real PyTorch training whose minibatches are drawn at random, so the saved
loss is noisy from step to step: a run that cannot learn (lr=0) must be reported, a run that
learns must not, whatever the noise does to single steps."""

from __future__ import annotations

import pytest
import torch
from test_rules_helpers import train_torch
from torch import nn

from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import LossNotDecreasing
from smdebug_lite.trials import create_trial

STEPS = 40
BATCH = 64
WEIGHTS = torch.tensor([[1.5], [-2.0], [0.5], [3.0], [-1.0], [0.25], [2.0], [-0.5]])


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "0.05")
    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.05")


def noisy_batches(seed: int):
    """A fresh random minibatch of a noisy linear regression problem at every step."""
    gen = torch.Generator().manual_seed(seed)

    def batch(mode, i):
        x = torch.randn(BATCH, 8, generator=gen)
        y = x @ WEIGHTS + 0.5 * torch.randn(BATCH, 1, generator=gen)
        return x, y

    return batch


def run(tmp_path, name: str, lr: float, seed: int):
    torch.manual_seed(seed)
    model = nn.Linear(8, 1)
    log = train_torch(str(tmp_path / name), model, noisy_batches(seed), loss_fn=nn.MSELoss(),
                      lr=lr, steps=STEPS, include_collections=("losses",))
    return log, create_trial(log.out_dir, timeout=30)


def single_step_misses_it(losses: list[float], num_steps: int = 10) -> bool:
    """True when comparing single losses num_steps apart sees a decrease at every check, as a
    rule without averaging would: the noise alone makes the flat run look like progress."""
    return any(losses[s] < losses[s - num_steps] for s in range(num_steps, len(losses),
                                                                num_steps))


# Seeds whose noise a comparison of single losses num_steps apart took for progress at every
# check (so the rule never fired before it compared windowed means).
@pytest.mark.parametrize("seed", [6, 11, 15])
def test_lr_zero_with_noisy_minibatches_fires(tmp_path, seed):
    log, trial = run(tmp_path, "stuck", lr=0.0, seed=seed)
    assert len(set(log.losses)) == STEPS  # every minibatch differs: the loss is noisy
    res = invoke_rule(LossNotDecreasing(trial))
    assert res.status == "IssuesFound", res.message
    assert res.step is not None and res.step < STEPS


def test_lr_zero_noise_defeats_single_step_comparison(tmp_path):
    # The situation the windowed means exist for: with single losses some check sees a
    # decrease, and a decrease resets the baseline.
    log, trial = run(tmp_path, "stuck", lr=0.0, seed=6)
    assert single_step_misses_it(log.losses)
    assert invoke_rule(LossNotDecreasing(trial)).status == "IssuesFound"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_learning_with_noisy_minibatches_does_not_fire(tmp_path, seed):
    log, trial = run(tmp_path, "learning", lr=0.02, seed=seed)
    # Noisy: the loss goes up on many single steps, yet it decreases overall.
    ups = sum(b > a for a, b in zip(log.losses, log.losses[1:], strict=False))
    assert ups >= 5
    assert sum(log.losses[-10:]) < 0.5 * sum(log.losses[:10])
    res = invoke_rule(LossNotDecreasing(trial))
    assert (res.status, res.steps_evaluated) == ("NoIssuesFound", STEPS), res.message


def test_window_and_tolerance_parameters(tmp_path):
    _, trial = run(tmp_path, "stuck", lr=0.0, seed=0)
    rule = LossNotDecreasing(trial, window_steps="5", noise_tolerance="0.5")
    assert (rule.window_steps, rule.noise_tolerance) == (5, 0.5)
    assert rule.params["window_steps"] == 5 and rule.params["noise_tolerance"] == 0.5
    default = LossNotDecreasing(trial)
    assert (default.window_steps, default.noise_tolerance) == (10, 1.0)
    assert LossNotDecreasing(trial, num_steps="4").window_steps == 4
    for name, bad in (("window_steps", "0"), ("window_steps", "2.5"),
                      ("noise_tolerance", "-1"), ("noise_tolerance", "lots")):
        with pytest.raises(ValueError, match=name):
            LossNotDecreasing(trial, **{name: bad})
