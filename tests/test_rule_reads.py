"""How rules read a trial step after step: the rule cache's reductions computed together (for the
tensors of one step, and ahead for the following steps of a tensor), the float fast path of its
`compute_reduction`, saved counts read alone, one view per tensor. Every answer must equal the
one-by-one definition, and every value is still read from storage once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_rules_helpers import Step, write_trial

from smdebug_lite.exceptions import SMDebugTypeError, TensorCorrupted, TensorUnavailableForStep
from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules import Rule, invoke_rule
from smdebug_lite.rules.builtin import ExplodingTensor, VanishingGradient
from smdebug_lite.rules.tensor_cache import TensorCache, compute_reduction
from smdebug_lite.trials import Tensor, create_trial

NAMES = ["gradient/a", "gradient/b", "gradient/c"]
SHAPES = {"gradient/a": (4, 4), "gradient/b": (7,), "gradient/c": ()}


def _methods(x: np.ndarray, name: str, is_abs: bool) -> float:
    """The definition: numpy's ndarray methods, warnings silenced."""
    x = np.abs(x) if is_abs else x
    with np.errstate(all="ignore"):
        return float(getattr(x, name)())


def _same(a: float, b: float) -> bool:
    return a == b or (np.isnan(a) and np.isnan(b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_fast_path_equals_the_methods(dtype):
    rng = np.random.default_rng(3)
    for i in range(400):
        shape = [(int(rng.integers(1, 300)),), (5, 9), (), (3, 4, 5)][i % 4]
        x = (rng.standard_normal(shape) * 10.0 ** int(rng.integers(-30, 30))).astype(dtype)
        if i % 7 == 0:
            x.flat[0] = np.nan
        if i % 11 == 0:
            x.flat[-1] = np.inf
        if i % 5 == 0:
            x = x.T  # not contiguous
        for name in ("min", "max", "mean", "sum"):
            for is_abs in (False, True):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # no warning escapes, as before
                    got = compute_reduction(x, name, is_abs)
                assert _same(got, _methods(x, name, is_abs)), (name, is_abs, x)
    big = np.full(3, np.finfo(dtype).max, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compute_reduction(big, "sum") == np.inf


def _trial(tmp_path, n: int, bad: dict[tuple[str, int], np.ndarray] | None = None):
    rng = np.random.default_rng(0)
    steps = []
    for i in range(n):
        tensors = {name: rng.standard_normal(SHAPES[name]).astype(np.float32) for name in NAMES}
        for (name, step), value in (bad or {}).items():
            if step == i:
                tensors[name] = value
        steps.append(Step(i, tensors))
    return create_trial(write_trial(str(tmp_path / "t"), steps, {"gradients": NAMES}))


@pytest.mark.parametrize("reduction", ["mean", "min", "max", "sum", "std", "l2"])
def test_a_run_of_steps_gives_the_one_by_one_answers(tmp_path, count_value_calls, reduction):
    """A rule asking every step in order has the reductions of the following steps computed
    in one batch; each answer equals `compute_reduction` of that step's value, and each value
    is read from storage once."""
    trial = _trial(tmp_path, 90)
    cache = TensorCache()
    for step in trial.steps():
        cache.begin_step(step)
        for name in NAMES:
            got = cache.reduction(trial, name, step, reduction, abs=True)
            expected = compute_reduction(trial.tensor(name).value(step), reduction, True)
            assert _same(got, expected), (name, step)
        if step == 1 and reduction in ("mean", "min", "max", "sum"):  # the batch was made
            ahead = ((trial, NAMES[0], 2, ModeKeys.GLOBAL, None), reduction, True)
            assert ahead in cache._reductions
    counted = {k: v for k, v in count_value_calls.items()}
    # The checks above read every value once more themselves.
    assert set(counted) == {(n, s) for n in NAMES for s in range(90)}
    assert max(counted.values()) == 2


def test_the_tensors_of_a_step_together(tmp_path):
    trial = _trial(tmp_path, 20)
    together, alone = TensorCache(), TensorCache()
    for step in trial.steps():
        got = together.reductions(trial, NAMES, step, "mean", abs=True)
        assert got == [alone.reduction(trial, n, step, "mean", abs=True) for n in NAMES]


def test_an_error_comes_in_its_turn(tmp_path):
    """`reductions` hands back a read's exception in place of the value; a rule stopping at an
    earlier tensor never meets it, and a tensor without a value at the step is skipped."""
    trial = _trial(tmp_path, 3)
    cache = TensorCache()
    got = cache.reductions(trial, [*NAMES, "nope"], 1, "mean")
    assert all(isinstance(v, float) for v in got[:3])
    assert isinstance(got[3], Exception)

    class Broken:  # a tensor whose read fails
        def __init__(self, error):
            self.error = error

        def value(self, *args, **kwargs):
            raise self.error

        def reduction_value(self, *args, **kwargs):
            raise TensorUnavailableForStep("x", 1)

    cache = TensorCache()
    cache._tensors[(trial, "broken")] = Broken(TensorCorrupted("f", 1, "broken", "bad crc"))
    cache._tensors[(trial, "partial")] = Broken(TensorUnavailableForStep("partial", 1))
    got = cache.reductions(trial, ["gradient/a", "broken", "partial"], 1, "mean")
    assert isinstance(got[0], float) and isinstance(got[1], TensorCorrupted)
    assert isinstance(got[2], TensorUnavailableForStep)


def test_vanishing_gradient_fires_at_the_first_small_gradient(tmp_path):
    tiny = np.full((7,), 1e-9, np.float32)
    trial = _trial(tmp_path, 60, {("gradient/b", 41): tiny})
    rule = VanishingGradient(trial)
    res = invoke_rule(rule)
    assert (res.status, res.step) == ("IssuesFound", 41)
    assert rule.report["Details"]["tensor"] == "gradient/b"


def test_exploding_tensor_reads_no_other_saved_reduction(tmp_path, monkeypatch):
    """Where no counts were saved, the other saved reductions are not read to find that out."""
    rng = np.random.default_rng(1)
    steps = []
    for i in range(5):
        value = rng.standard_normal(4).astype(np.float32)
        if i == 3:
            value[1] = np.inf
        steps.append(Step(i, {"grad/w": value}, reductions={("grad/w", "mean", False): 0.5,
                                                            ("grad/w", "max", False): 1.0}))
    trial = create_trial(write_trial(str(tmp_path / "r"), steps, {"gradients": ["grad/w"]}))
    assert set(trial.tensor("grad/w").reduction_values(0)) == {("mean", False), ("max", False)}
    assert trial.tensor("grad/w").reduction_values(0, only=[("num_nan", False)]) == {}
    assert set(trial.tensor("grad/w").reduction_values(0, only=[("max", False)])) == {
        ("max", False)}
    asked: list = []
    original = Tensor.reduction_values

    def spy(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        asked.extend(out)
        return out

    monkeypatch.setattr(Tensor, "reduction_values", spy)
    res = invoke_rule(ExplodingTensor(trial, collection_names="gradients"))
    assert (res.status, res.step) == ("IssuesFound", 3)
    assert asked == []


def test_one_view_per_tensor(tmp_path):
    trial = _trial(tmp_path, 2)

    class Looks(Rule):
        def invoke_at_step(self, step):
            a, b = self.base_trial.tensor("gradient/a"), self.base_trial.tensor("gradient/a")
            assert a is b
            assert a.reduction_value(step, "mean", mode="global") == \
                b.reduction_value(step, "mean", mode=ModeKeys.GLOBAL)
            value = a.value(step)
            value[...] = 0  # a copy: the cached array stays as read
            assert np.any(a.value(step) != 0)
            return False

    assert invoke_rule(Looks(trial)).steps_evaluated == 2


def test_saved_counts_are_looked_for_once_per_step(tmp_path):
    """`has_saved_reduction` answers from the index; ExplodingTensor reads counts only at the
    steps that have some, and still finds a non-finite value by its counts there."""
    steps = []
    for i in range(5):
        value = np.ones(3, np.float32)
        reductions = {}
        if i == 2:
            value[0] = np.nan
            reductions = {("grad/w", "num_nan", False): 1, ("grad/w", "num_inf", False): 0}
        steps.append(Step(i, {"grad/w": value}, reductions=reductions))
    trial = create_trial(write_trial(str(tmp_path / "c"), steps, {"gradients": ["grad/w"]}))
    assert [trial.has_saved_reduction(s, "num_nan") for s in range(5)] == [
        False, False, True, False, False]
    assert not trial.has_saved_reduction(2, "num_nan", abs=True)
    assert not trial.has_saved_reduction(2, "mean")
    assert not trial.has_saved_reduction(99, "num_nan")
    rule = ExplodingTensor(trial)
    res = invoke_rule(rule)
    assert (res.status, res.step) == ("IssuesFound", 2)
    assert rule.report["Details"]["worker"] == "worker_0"  # named by the counts
    assert rule.cache.loads == 2  # steps 0 and 1 read; step 2 answered by its counts


def test_the_tensors_of_the_next_step_are_read_together(tmp_path, count_value_calls):
    """A rule reading many tensors step after step has each step's values read in one batch
    (`Trial.step_values`); the values are those `Tensor.value` gives, a tensor missing at a
    step is still reported as missing, and each value is read once."""
    names = [f"gradient/t{i}" for i in range(10)]
    rng = np.random.default_rng(2)
    steps = []
    for i in range(30):
        tensors = {n: rng.standard_normal((3, 2)).astype(np.float32) for n in names}
        if i == 17:
            del tensors[names[4]]
        steps.append(Step(i, tensors))
    path = write_trial(str(tmp_path / "many"), steps, {"gradients": names})
    expected = {(n, s.step): s.tensors[n] for s in steps for n in s.tensors}
    seen: dict = {}
    missing: list = []

    class ReadsAll(Rule):
        def invoke_at_step(self, step):
            for name in names:
                try:
                    seen[(name, step)] = self.base_trial.tensor(name).value(step)
                except TensorUnavailableForStep:
                    missing.append((name, step))
            return False

    trial = create_trial(path)
    assert trial.step_values(3, [names[0], "nope"])[1] is None
    assert np.array_equal(trial.step_values(3, [names[0]])[0], expected[(names[0], 3)])
    count_value_calls.clear()
    rule = ReadsAll(create_trial(path))
    assert invoke_rule(rule).steps_evaluated == 30
    assert missing == [(names[4], 17)]
    assert seen.keys() == expected.keys()
    assert all(np.array_equal(seen[k], v) for k, v in expected.items())
    assert max(count_value_calls.values()) == 1
    assert len(count_value_calls) < len(expected) // 2  # most came in batches


def test_step_reads_refuse_a_step_that_is_no_number(tmp_path):
    """The batch reads name a bad step as `Tensor.value` does; a step not saved reads nothing."""
    trial = _trial(tmp_path, 3)
    for read in (lambda s: trial.step_values(s, NAMES[:2]),
                 lambda s: trial.has_saved_reduction(s, "num_nan")):
        with pytest.raises(SMDebugTypeError, match="step='a' is not a step number"):
            read("a")
    assert trial.step_values(99, NAMES[:2]) == [None, None]
    assert not trial.has_saved_reduction(99, "num_nan")
