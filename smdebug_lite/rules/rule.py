"""The Rule base class: a check evaluated on a trial step after step.

Subclasses implement ``invoke_at_step(step)`` (a global step) and return True when the
condition is met. Constructor arguments other than the trials arrive as strings when the rule
runs on SageMaker, so subclasses parse them (see `smdebug_lite.rules.params`).

Both historical base-class signatures work: ``Rule(base_trial, other_trials=None)`` (smdebug
< 1.0.9 and the AWS examples, which call ``super().__init__(base_trial)``) and
``Rule(base_trial, action_str, other_trials=None)`` (smdebug >= 1.0.9).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from smdebug_lite.exceptions import RuleEvaluationConditionMet
from smdebug_lite.log.logger import get_logger
from smdebug_lite.rules.actions import Actions
from smdebug_lite.rules.actions.rule_event import ISSUES_FOUND, RuleEvent, evidence_of
from smdebug_lite.rules.required_tensors import RequiredTensors
from smdebug_lite.rules.tensor_cache import TensorCache
from smdebug_lite.rules.trial_view import TrialView, unwrap


def _as_trial_list(other_trials: Any) -> list[Any] | None:
    if other_trials is None:
        return None
    if isinstance(other_trials, (list, tuple)):
        return list(other_trials)
    return [other_trials]


@contextlib.contextmanager
def refresh_suspended(trials: Sequence[Any]) -> Iterator[None]:
    """Freeze the trials' view of the data while one step is evaluated.

    The rule already waited for the step, so every read inside sees the same set of steps.
    The previous setting is restored (smdebug's `no_refresh` always restored True).
    """
    saved = []
    for t in trials:
        raw = unwrap(t)
        if hasattr(raw, "dynamic_refresh"):
            saved.append((raw, raw.dynamic_refresh))
            raw.dynamic_refresh = False
    try:
        yield
    finally:
        for raw, value in saved:
            raw.dynamic_refresh = value


class Rule(ABC):
    """Base class of every rule. Attributes subclasses use:

    * ``base_trial`` / ``other_trials`` / ``trials``: the trials, seen through the rule's
      value cache (`TrialView`), so each tensor is read from storage at most once per step;
    * ``req_tensors``: `RequiredTensors`, filled by ``set_required_tensors(step)``;
    * ``rule_name`` (the class name), ``logger``, ``actions``, ``report``.
    """

    def __init__(self, base_trial: Any, action_str: Any = None, other_trials: Any = None) -> None:
        # Rule(base_trial, [other, ...]) is the pre-1.0.9 positional form.
        if action_str is not None and not isinstance(action_str, str) and other_trials is None:
            action_str, other_trials = None, action_str
        self.cache = TensorCache()
        self.base_trial = TrialView(base_trial, self.cache)
        others = _as_trial_list(other_trials)
        self.other_trials = None if others is None else [TrialView(t, self.cache) for t in others]
        self.trials = [self.base_trial, *(self.other_trials or [])]
        self.req_tensors = RequiredTensors(self.base_trial, self.other_trials, cache=self.cache)
        self.logger = get_logger("rules")
        self.rule_name = self.__class__.__name__
        self.action_str = action_str
        self.actions = Actions(action_str, rule_name=self.rule_name,
                               default_stop_signal_dir=getattr(unwrap(base_trial), "path", None))
        self._complete_step: int | None = None  # set by invoke_rule: no need to wait for it
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }

    @property
    def _actions(self) -> Actions:  # smdebug's attribute name
        return self.actions

    # -- what subclasses implement --------------------------------------------------------

    def set_required_tensors(self, step: int) -> None:
        """Declare tensors with ``self.req_tensors.add(...)``; optional."""
        return None

    @abstractmethod
    def invoke_at_step(self, step: int) -> Any:
        """Evaluate the rule at a global step; truthy means the condition is met."""

    def check_while_waiting(self, next_step: int, last_step: int | None) -> bool:
        """Called by `invoke_rule` while it waits for `next_step` to be saved.

        Rules about training progress (StalledTrainingRule) return True here to fire without a
        new step; the condition is then reported at `last_step` (the last step evaluated).
        A rule overriding this bounds the wait itself: `invoke_rule` then applies only an
        explicit ``timeout``, not the trial's.
        """
        return False

    # -- evaluation -----------------------------------------------------------------------

    def mark_step_complete(self, step: int) -> None:
        """Tell the rule that `step` is complete (listed by ``trial.steps()``), so the next
        `invoke` of it need not wait for it; `invoke_rule` knows this of every step it runs."""
        self._complete_step = step

    def invoke(self, step: int) -> None:
        """Evaluate one step; raises RuleEvaluationConditionMet when the condition holds."""
        self.logger.debug("Invoking rule %s for step %s", self.rule_name, step)
        if self._complete_step != step:  # invoke_rule already knows the step is complete
            unwrap(self.base_trial).wait_for_steps([step])
        self.cache.begin_step(step)
        with refresh_suspended(self.trials):
            self.req_tensors.clear()
            self.set_required_tensors(step)
            self.req_tensors.fetch()
            val = self.invoke_at_step(step)
        self.report["Datapoints"] += 1
        if val:
            self.fire(step)

    def fire(self, step: int, message: str | None = None) -> None:
        """Run the actions and raise RuleEvaluationConditionMet(rule_name, step)."""
        exc = RuleEvaluationConditionMet(self.rule_name, step)
        self.report["RuleTriggered"] += 1
        self.report["Violations"] += 1
        text = message or str(exc)
        if isinstance(self.actions, Actions):
            trial = getattr(unwrap(self.base_trial), "path", None)
            self.actions.invoke(text, event=RuleEvent(
                self.rule_name, ISSUES_FOUND, step, None if trial is None else str(trial), text,
                evidence_of(self.report)))
        else:  # replaced by the rule with an object of its own
            self.actions.invoke(text)
        raise exc
