"""Rule base class, RequiredTensors, invoke_rule semantics and the per-rule value cache, on real
trials written by our writer and read by our Trial."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from test_rules_helpers import Step, TrialBuilder, scalar_steps, write_live, write_trial

from smdebug_lite.exceptions import (
    RuleEvaluationConditionMet,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules import RequiredTensors, Rule, RuleResult, invoke_rule
from smdebug_lite.rules.builtin import ExplodingTensor, VanishingGradient
from smdebug_lite.trials import create_trial

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fast_polling(monkeypatch):
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "0.05")
    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.05")


class Threshold(Rule):
    """Fires when `loss` exceeds a threshold; records the steps it saw."""

    def __init__(self, base_trial, threshold="1e9"):
        super().__init__(base_trial)
        self.threshold = float(threshold)
        self.seen: list[int] = []

    def invoke_at_step(self, step):
        self.seen.append(step)
        return float(self.base_trial.tensor("loss").value(step)) > self.threshold


def _trial(tmp_path, n=10, **kw):
    return create_trial(write_trial(str(tmp_path / "t"), scalar_steps(n), **kw))


# -- constructor signatures ------------------------------------------------------------------


def test_rule_accepts_every_upstream_signature(tmp_path):
    trial = _trial(tmp_path, 2)

    class A(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)

        def invoke_at_step(self, step):
            return False

    class B(Rule):
        def __init__(self, base_trial, other_trials=None):
            super().__init__(base_trial, other_trials=other_trials)

        def invoke_at_step(self, step):
            return False

    class C(Rule):
        def __init__(self, base_trial, action_str, other_trials=None):
            super().__init__(base_trial, action_str, other_trials)

        def invoke_at_step(self, step):
            return False

    class D(Rule):  # pre-1.0.9 positional other_trials
        def __init__(self, base_trial, other_trials):
            super().__init__(base_trial, other_trials)

        def invoke_at_step(self, step):
            return False

    assert A(trial).rule_name == "A" and A(trial).other_trials is None
    b = B(trial, other_trials=[trial])
    assert len(b.trials) == 2 and b.other_trials[0] == trial
    c = C(trial, "", [trial])
    assert len(c.actions) == 0 and len(c.trials) == 2
    d = D(trial, [trial])
    assert d.action_str is None and len(d.trials) == 2
    # The views behave like the trial they wrap.
    assert isinstance(A(trial).base_trial, type(trial))
    assert A(trial).base_trial.steps() == trial.steps()
    assert A(trial).report["RuleTriggered"] == 0

    with pytest.raises(TypeError):
        Rule(trial)  # abstract


# -- invoke_rule ---------------------------------------------------------------------------


def test_no_issues_runs_every_saved_step_and_ends_cleanly(tmp_path):
    rule = Threshold(_trial(tmp_path, 10))
    progress = []
    res = invoke_rule(rule, on_progress=lambda n, s: progress.append((n, s)))
    assert isinstance(res, RuleResult)
    assert (res.status, res.step, res.steps_evaluated, res.last_step) == ("NoIssuesFound", None,
                                                                         10, 9)
    assert res.message == "" and res.error is None
    assert rule.seen == list(range(10))
    assert progress == [(i + 1, i) for i in range(10)]


def test_condition_met_stops_at_first_step(tmp_path):
    rule = Threshold(_trial(tmp_path, 10), threshold="3.5")
    res = invoke_rule(rule)
    assert res.status == "IssuesFound" and res.step == 4
    assert res.message == str(RuleEvaluationConditionMet("Threshold", 4))
    assert res.message == ("Evaluation of the rule Threshold at step 4 resulted in the condition "
                           "being met")
    assert rule.seen == [0, 1, 2, 3, 4] and res.steps_evaluated == 5
    assert rule.report["RuleTriggered"] == 1


def test_raise_eval_cond_reraises(tmp_path):
    rule = Threshold(_trial(tmp_path, 10), threshold="3.5")
    with pytest.raises(RuleEvaluationConditionMet) as ei:
        invoke_rule(rule, raise_eval_cond=True)
    assert ei.value.step == 4 and ei.value.rule_name == "Threshold"


def test_start_and_end_step(tmp_path):
    rule = Threshold(_trial(tmp_path, 10))
    res = invoke_rule(rule, start_step=3, end_step=7)
    assert rule.seen == [3, 4, 5, 6] and res.last_step == 6 and res.status == "NoIssuesFound"


def test_unsaved_steps_are_skipped(tmp_path):
    steps = [Step(s, {"loss": np.float32(s)}) for s in (0, 5, 10, 15)]
    rule = Threshold(create_trial(write_trial(str(tmp_path / "t"), steps)))
    res = invoke_rule(rule, start_step=1)
    assert rule.seen == [5, 10, 15] and res.steps_evaluated == 3


def test_skip_list_exceptions_continue_other_errors_propagate(tmp_path):
    trial = _trial(tmp_path, 6)

    class Flaky(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)
            self.seen = []

        def invoke_at_step(self, step):
            self.seen.append(step)
            if step == 1:
                raise TensorUnavailableForStep("x", step)
            if step == 2:
                self.base_trial.tensor("not_saved")  # TensorUnavailable
            if step == 3:
                self.base_trial.tensor("loss").value(step, mode=ModeKeys.EVAL)  # StepUnavailable
            return False

    rule = Flaky(trial)
    assert invoke_rule(rule).status == "NoIssuesFound"
    assert rule.seen == list(range(6))

    class Broken(Rule):
        def invoke_at_step(self, step):
            raise ZeroDivisionError("bug in the rule")

    with pytest.raises(ZeroDivisionError):
        invoke_rule(Broken(trial))


def test_waits_for_live_steps_then_ends_when_training_ends(tmp_path):
    out = str(tmp_path / "live")
    writer = write_live(out, scalar_steps(6), delay=0.1)
    time.sleep(0.05)
    trial = create_trial(out)
    rule = Threshold(trial)
    res = invoke_rule(rule)
    writer.join(5)
    assert res.status == "NoIssuesFound" and rule.seen == list(range(6))


def test_live_condition_met(tmp_path):
    out = str(tmp_path / "live")
    writer = write_live(out, scalar_steps(8), delay=0.05)
    time.sleep(0.05)
    res = invoke_rule(Threshold(create_trial(out), threshold="4.5"))
    writer.join(5)
    assert (res.status, res.step) == ("IssuesFound", 5)


def test_stop_event_stops_promptly_while_waiting(tmp_path):
    out = str(tmp_path / "live")
    b = TrialBuilder(out)
    for s in scalar_steps(3):
        b.add(s)
    b.flush()  # no end marker: training "still running"
    stop, waiting = threading.Event(), threading.Event()
    stopped_at: list[float] = []

    def stop_once_waiting() -> None:  # (not after a fixed delay: the steps before may be slow)
        waiting.wait(60)
        stopped_at.append(time.monotonic())
        stop.set()

    threading.Thread(target=stop_once_waiting, daemon=True).start()
    res = invoke_rule(Threshold(create_trial(out)), stop_event=stop,
                      on_wait=lambda pos, waited: waiting.set())
    assert res.status == "Stopped" and res.steps_evaluated == 3 and res.last_step == 2
    assert time.monotonic() - stopped_at[0] < 10
    b.close()


def test_stop_event_set_before_start(tmp_path):
    stop = threading.Event()
    stop.set()
    res = invoke_rule(Threshold(_trial(tmp_path, 3)), stop_event=stop)
    assert res.status == "Stopped" and res.steps_evaluated == 0


# -- required tensors ------------------------------------------------------------------------


def test_required_tensors_declare_previous_steps(tmp_path):
    steps = [Step(i, {"w": np.full(3, float(i)), **({"b": np.ones(2)} if i % 2 == 0 else {})})
             for i in range(6)]
    trial = create_trial(write_trial(str(tmp_path / "t"), steps))

    class Diff(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)
            self.evaluated = []

        def set_required_tensors(self, step):
            self.req_tensors.add("w", steps=[step, step - 1] if step else [step])
            self.req_tensors.add("b", steps=[step])  # missing at odd steps -> step skipped
            self.req_tensors.add("^[wb]$", steps=[step], should_match_regex=True)

        def invoke_at_step(self, step):
            assert sorted(self.req_tensors.get_names()) == ["b", "w"]
            assert {t.name for t in self.req_tensors.get()} == {"b", "w"}
            self.evaluated.append(step)
            return False

    rule = Diff(trial)
    loads = rule.cache.loads
    invoke_rule(rule)
    assert rule.evaluated == [0, 2, 4]
    assert rule.cache.loads > loads

    rt = RequiredTensors(trial)
    with pytest.raises(TensorUnavailable):
        rt.add("nope", steps=[0])
    rt.add("w", steps=[1, 2])
    assert rt.get_tensor_steps("w") == [1, 2]


# -- the cache: each tensor value is read once per step -----------------------------------------



def _gradient_trial(tmp_path, n=5):
    rng = np.random.default_rng(0)
    names = ["gradient/a", "gradient/b"]
    steps = [Step(i, {n_: rng.normal(size=(4, 4)).astype(np.float32) for n_ in names})
             for i in range(n)]
    return create_trial(write_trial(str(tmp_path / "g"), steps, {"gradients": names}))


def test_each_value_is_read_once_per_step(tmp_path, count_value_calls):
    trial = _gradient_trial(tmp_path)

    class ManyReads(Rule):
        def set_required_tensors(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                self.req_tensors.add(name, steps=[step] + ([step - 1] if step else []))

        def invoke_at_step(self, step):
            for name in self.base_trial.tensors(collection="gradients"):
                t = self.base_trial.tensor(name)
                t.value(step)
                t.value(step)
                t.reduction_value(step, "mean", abs=True)
                t.reduction_value(step, "max")
                t.reduction_value(step, "l2")
                if step:
                    t.value(step - 1)
            return False

    invoke_rule(ManyReads(trial))
    assert count_value_calls and max(count_value_calls.values()) == 1
    assert len(count_value_calls) == 10

    count_value_calls.clear()
    rule = VanishingGradient(trial)
    invoke_rule(rule)
    assert max(count_value_calls.values()) == 1 and len(count_value_calls) == 10


def test_values_are_copies_for_custom_rules(tmp_path):
    trial = _gradient_trial(tmp_path, 1)

    class Mutates(Rule):
        def invoke_at_step(self, step):
            v = self.base_trial.tensor("gradient/a").value(step)
            v[:] = 0
            return bool(np.all(self.base_trial.tensor("gradient/a").value(step) == 0))

    assert invoke_rule(Mutates(trial)).status == "NoIssuesFound"


def test_reductions_only_trial_uses_saved_reductions(tmp_path, count_value_calls):
    red = {("gradient/a", "mean", True): 1e-9, ("gradient/a", "mean", False): 0.0,
           ("gradient/a", "max", False): 1.0}
    steps = [Step(0, {}, reductions={("gradient/a", "mean", True): 0.5}),
             Step(1, {}, reductions=red)]
    trial = create_trial(write_trial(str(tmp_path / "r"), steps, {"gradients": ["gradient/a"]}))
    res = invoke_rule(VanishingGradient(trial))
    assert (res.status, res.step) == ("IssuesFound", 1)

    nan_steps = [Step(0, {}, reductions={("w", "max", False): 1.0, ("w", "prod", False): np.inf}),
                 Step(1, {}, reductions={("w", "max", False): np.inf})]
    trial2 = create_trial(write_trial(str(tmp_path / "n"), nan_steps))
    res = invoke_rule(ExplodingTensor(trial2))
    assert (res.status, res.step) == ("IssuesFound", 1)
    # Only failed attempts to read raw values (the reductions are read directly).
    assert all(v == 1 for v in count_value_calls.values())


# -- the docs' custom rule, unchanged, through the `smdebug` import name --------------------------

DOCS_RULE = '''
from smdebug.rules import Rule

class VanishingGradientRule(Rule):
    def __init__(self, base_trial, threshold=0.0000001):
        super().__init__(base_trial, other_trials=None)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tensorname in self.base_trial.tensors(collection='gradients'):
            tensor = self.base_trial.tensor(tensorname)
            abs_mean = tensor.reduction_value(step, 'mean', abs=True)
            if abs_mean < self.threshold:
                return True
                return False
'''

DOCS_DRIVER = '''
import sys
import _smdebug_lite_alias
_smdebug_lite_alias.install()
from smdebug.rules import invoke_rule
from smdebug.trials import create_trial
from smdebug.exceptions import RuleEvaluationConditionMet
exec(compile(open(sys.argv[1]).read(), "rule.py", "exec"))
trial = create_trial(sys.argv[2])
rule_obj = VanishingGradientRule(trial, threshold=sys.argv[3])
try:
    invoke_rule(rule_obj, start_step=0, end_step=None, raise_eval_cond=True)
    print("RESULT none")
except RuleEvaluationConditionMet as e:
    print("RESULT", e.step)
import smdebug, smdebug_lite
from smdebug.rules.rule_invoker import invoke_rule as i2
from smdebug.rules.req_tensors import RequiredTensors
from smdebug.rules.rule import Rule
from smdebug.rules.action import Actions
print("ALIASED", smdebug is smdebug_lite and i2 is invoke_rule)
'''


def test_docs_vanishing_gradient_rule_runs_unchanged(tmp_path):
    names = ["gradient/a", "gradient/b"]
    steps = [Step(i, {"gradient/a": np.full(4, 10.0 ** -i, dtype=np.float32),
                      "gradient/b": np.ones(4, dtype=np.float32)}) for i in range(10)]
    out = write_trial(str(tmp_path / "t"), steps, {"gradients": names})
    rule_file = tmp_path / "rule.py"
    rule_file.write_text(DOCS_RULE)
    for threshold, expected in (("0.0000001", "8"), ("1e-20", "none")):
        proc = subprocess.run([sys.executable, "-c", DOCS_DRIVER, str(rule_file), out, threshold],
                              capture_output=True, text=True, cwd=str(REPO), timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"RESULT {expected}" in proc.stdout
        assert "ALIASED True" in proc.stdout


def test_end_step_does_not_wait_for_later_steps(tmp_path):
    out = str(tmp_path / "live")
    b = TrialBuilder(out)
    for s in scalar_steps(5):
        b.add(s)
    b.flush()  # training still running, steps >= 5 not written yet
    rule = Threshold(create_trial(out))
    waits: list[int] = []
    res = invoke_rule(rule, end_step=5, on_wait=lambda pos, waited: waits.append(pos))
    assert res.status == "NoIssuesFound" and rule.seen == list(range(5))
    assert waits == []
    b.close()
