"""NaN/Inf accounting: the num_nan/num_inf/num_zero counts saved by a real PyTorch run that
diverges, read back by our Trial and by smdebug 1.0.34, and used by ExplodingTensor to name the
first offending tensor, step and worker without reading the tensors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from refvenv import ref_python, run_ref
from test_rules_helpers import Step, TrialBuilder, fixed_batches, train_torch
from torch import nn

from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import ExplodingTensor
from smdebug_lite.trials import create_trial

COUNTS = ReductionConfig(reductions=["num_nan", "num_inf", "num_zero"], save_raw_tensor=True)
PROBE = np.array([np.nan, np.inf, 0.0, 1.0, -np.inf], dtype=np.float32)


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "0.05")
    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.05")
    torch.manual_seed(0)


def _diverging_run(out: str, reduction_config: ReductionConfig):
    """An MLP trained with lr=1e4: weights and gradients overflow, then turn NaN."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    y = x @ torch.randn(8, 1, generator=g)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def probe(hook, *_):
        hook.save_tensor("probe", PROBE)  # a numpy value: the hooks' numpy path

    return train_torch(out, model, fixed_batches(x, y), loss_fn=nn.MSELoss(), lr=1e4, steps=12,
                       reduction_config=reduction_config, on_train_step=probe)


def _first_offender(trial, names: set[str]) -> tuple[int, str]:
    """(step, tensor) where a raw value first holds NaN or Inf, in the rule's order."""
    for step in trial.steps():
        for name in trial.tensor_names(step=step):
            if name in names and not np.isfinite(trial.tensor(name).value(step)).all():
                return step, name
    raise AssertionError("the run never diverged")


def _selected(trial) -> set[str]:
    return set(trial.tensor_names(collection="weights")) | set(
        trial.tensor_names(collection="gradients"))


def test_torch_run_saves_counts_and_the_rule_names_the_tensor(tmp_path):
    out = str(tmp_path / "run")
    _diverging_run(out, COUNTS)
    trial = create_trial(out)
    selected = _selected(trial)
    step, name = _first_offender(trial, selected)
    assert step > 0

    # Saved counts (computed on the tensor's device) agree with the raw values.
    for tname in selected:
        t = trial.tensor(tname)
        for s in t.steps():
            raw = t.value(s)
            saved = t.reduction_values(s)
            assert {k for k, _ in saved} == {"num_nan", "num_inf", "num_zero"}
            assert int(t.reduction_value(s, "num_nan")) == int(np.isnan(raw).sum())
            assert int(t.reduction_value(s, "num_inf")) == int(np.isinf(raw).sum())
            assert int(t.reduction_value(s, "num_zero")) == int((raw == 0).sum())
            assert t.reduction_value(s, "num_nan").dtype == np.int64
    probe = trial.tensor("probe")
    assert [int(probe.reduction_value(0, n)) for n in ("num_nan", "num_inf", "num_zero")] \
        == [1, 2, 1]
    # No saved counts for the loss (losses are saved raw only): computed from the value.
    loss = trial.tensor_names(collection="losses")[0]
    assert trial.tensor(loss).reduction_values(0) == {}
    assert int(trial.tensor(loss).reduction_value(0, "num_nan")) == 0

    rule = ExplodingTensor(trial, collection_names="weights,gradients")
    res = invoke_rule(rule)
    assert (res.status, res.step) == ("IssuesFound", step)
    details = rule.report["Details"]
    assert (details["step"], details["tensor"], details["worker"]) == (
        step, name, trial.workers()[0])
    raw = trial.tensor(name).value(step)
    assert (details["num_nan"], details["num_inf"]) == (int(np.isnan(raw).sum()),
                                                        int(np.isinf(raw).sum()))
    assert name in details["reason"] and details["worker"] in details["reason"]
    assert rule.cache.loads == 0  # the counts answered: no tensor was read


def test_counts_alone_are_enough(tmp_path):
    """Without raw tensors, the rule's other fallback (non-finite reductions) sees nothing in
    counts: only the counts path can find the step."""
    with_raw = str(tmp_path / "raw")
    _diverging_run(with_raw, COUNTS)
    step, name = _first_offender(create_trial(with_raw), _selected(create_trial(with_raw)))
    only = str(tmp_path / "counts")
    _diverging_run(only, ReductionConfig(reductions=["num_nan", "num_inf"]))
    trial = create_trial(only)
    rule = ExplodingTensor(trial, collection_names="weights,gradients")
    res = invoke_rule(rule)
    assert (res.status, res.step, rule.report["Details"]["tensor"]) == ("IssuesFound", step, name)
    nan_only = ExplodingTensor(create_trial(only), collection_names="weights,gradients",
                               only_nan="true")
    res = invoke_rule(nan_only)
    assert res.status == "IssuesFound" and nan_only.report["Details"]["num_nan"] > 0


def test_the_rule_names_the_worker(tmp_path):
    """Two workers; only worker_1's copy of the tensor goes NaN, at step 1."""
    out = str(tmp_path / "two")
    names = {"gradients": ["grad/w"]}
    clean = np.ones(4, np.float32)
    bad = np.array([1.0, np.nan, np.nan, 2.0], np.float32)
    for worker, late in (("worker_0", clean), ("worker_1", bad)):
        b = TrialBuilder(out, names, worker=worker, num_workers=2)
        for step, value in ((0, clean), (1, late)):
            counts = {("grad/w", "num_nan", False): int(np.isnan(value).sum()),
                      ("grad/w", "num_inf", False): 0}
            b.add(Step(step, {"grad/w": value}, reductions=counts))
        b.close()
    rule = ExplodingTensor(create_trial(out))
    res = invoke_rule(rule)
    assert (res.status, res.step) == ("IssuesFound", 1)
    d = rule.report["Details"]
    assert (d["tensor"], d["worker"], d["num_nan"], d["num_inf"]) == ("grad/w", "worker_1", 2, 0)


def test_without_counts_the_rule_reads_tensors_as_before(tmp_path):
    out = str(tmp_path / "plain")
    _diverging_run(out, ReductionConfig(save_raw_tensor=True))
    trial = create_trial(out)
    step, name = _first_offender(trial, _selected(trial))
    rule = ExplodingTensor(trial, collection_names="weights,gradients")
    res = invoke_rule(rule)
    assert (res.status, res.step, rule.report["Details"]["tensor"]) == ("IssuesFound", step, name)
    assert "worker" not in rule.report["Details"] and rule.cache.loads > 0


_SMDEBUG_READS = r"""
import json, sys
from smdebug.trials import create_trial
trial = create_trial(sys.argv[1])
out = {"collections": {}, "counts": {}}
for name, c in trial.collections().items():
    out["collections"][name] = c.reduction_config.reductions if c.reduction_config else None
for name in trial.tensor_names(collection="gradients"):
    t = trial.tensor(name)
    out["counts"][name] = {str(s): [int(t.reduction_value(s, r)) for r in ("num_nan", "num_inf")]
                           for s in t.steps()}
    out["value_shape"] = list(t.value(0).shape)
print(json.dumps(out))
"""


@pytest.mark.reference
def test_smdebug_reads_a_trial_with_counts(tmp_path):
    """smdebug 1.0.34 loads the collections (without the counts, which its ReductionConfig would
    reject) and returns the saved counts through reduction_value."""
    if ref_python()[0] is None:
        pytest.skip(ref_python()[1])
    out = str(tmp_path / "run")
    _diverging_run(out, COUNTS)
    files = list(Path(out, "collections").rglob("*_collections.json"))
    doc = json.loads(files[0].read_text())
    grads = next(c for c in doc["collections"].values() if c["name"] == "gradients")
    assert grads["reduction_config"]["reductions"] == ""
    assert grads["reduction_config"]["extension_reductions"] == "num_nan,num_inf,num_zero"

    proc = run_ref(_SMDEBUG_READS, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert theirs["collections"]["gradients"] == []
    ours = create_trial(out)
    for name, by_step in theirs["counts"].items():
        t = ours.tensor(name)
        assert by_step == {str(s): [int(t.reduction_value(s, "num_nan")),
                                    int(t.reduction_value(s, "num_inf"))] for s in t.steps()}
    assert any(v[0] for steps in theirs["counts"].values() for v in steps.values())
