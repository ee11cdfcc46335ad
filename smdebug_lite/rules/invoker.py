"""invoke_rule: run a rule over a trial's steps, waiting for new ones while training runs.

Semantics (smdebug's, with the differences noted):

* Steps are global steps from `start_step` (default 0) up to `end_step` (exclusive, default:
  until training ends). Only saved steps are evaluated; smdebug tried every integer and got
  StepUnavailable for each unsaved one, with the same outcome.
* A step is evaluated once it is complete (all workers wrote it, or training ended). While the
  next step is not there yet, the trial is polled every ``SMDEBUG_RULE_POLL_INTERVAL_S``
  seconds (default 1).
* TensorUnavailableForStep, StepUnavailable and TensorUnavailable skip the step.
* The first met condition ends the evaluation (status IssuesFound); smdebug kept going unless
  the exception had `end_of_rule`. With ``raise_eval_cond=True`` the exception is re-raised.
* When training has ended and every saved step was evaluated, it returns NoIssuesFound
  (smdebug let NoMoreData escape to the caller). NoMoreData raised from inside the rule, e.g. an
  other trial that ended earlier, also ends the evaluation cleanly.
* Any other exception from the rule propagates unchanged; the rule runner reports it as status
  Error. `RuleResult.status == "Error"` is only produced by callers that catch it.
* ``stop_event`` set: returns promptly with status Stopped (checked between steps and while
  waiting). ``on_progress(steps_evaluated, step)`` is called after each evaluated step,
  ``on_step_start(step)`` before it, and ``on_wait(next_step, waited_s)`` at each poll while
  waiting, so a caller can tell a waiting evaluation from a stuck one.
* Waiting for the next step is bounded (smdebug waited forever): after ``timeout`` seconds
  without a new step (default: the base trial's timeout, ``create_trial(timeout=...)`` or
  ``SMDEBUG_TRIAL_TIMEOUT``) `TrialDataTimeout` is raised, naming the trial path, the step
  waited for and how long. A rule that overrides ``check_while_waiting`` (StalledTrainingRule)
  watches the wait itself, so only an explicit ``timeout`` cuts its wait short.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.exceptions import (
    NoMoreData,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
    TrialDataTimeout,
)
from smdebug_lite.log.logger import get_logger
from smdebug_lite.rules.rule import Rule
from smdebug_lite.rules.trial_view import unwrap

logger = get_logger(__name__)

NO_ISSUES_FOUND = "NoIssuesFound"
ISSUES_FOUND = "IssuesFound"
ERROR = "Error"
STOPPED = "Stopped"

SKIPPED_EXCEPTIONS = (TensorUnavailableForStep, StepUnavailable, TensorUnavailable)


@dataclass
class RuleResult:
    """How one rule evaluation ended."""

    rule_name: str
    status: str  # NoIssuesFound | IssuesFound | Error | Stopped
    step: int | None = None  # where the condition was met
    message: str = ""
    steps_evaluated: int = 0
    last_step: int | None = None
    error: BaseException | None = None

    @property
    def issues_found(self) -> bool:
        return self.status == ISSUES_FOUND


def poll_interval() -> float:
    return max(0.01, env_float("SMDEBUG_RULE_POLL_INTERVAL_S", 1.0))


class _StepCursor:
    """Yields the saved, complete global steps of a trial in order, waiting for new ones."""

    def __init__(self, trial: Any, start: int) -> None:
        self.trial = trial
        self.pos = start
        self.known: list[int] = []

    def _refresh(self) -> bool:
        """Reload the step list; returns whether training has ended *before* the reload."""
        ended = bool(getattr(self.trial, "loaded_all_steps", False))
        self.known = sorted(self.trial.steps())
        return ended

    def next_step(self, waiting: Callable[[], bool]) -> int | None:
        """The next step >= pos, or None when training ended (or `waiting` says to give up)."""
        while True:
            i = bisect.bisect_left(self.known, self.pos)
            if i < len(self.known):
                return self.known[i]
            ended = self._refresh()
            i = bisect.bisect_left(self.known, self.pos)
            if i < len(self.known):
                return self.known[i]
            if ended:
                return None
            if getattr(self.trial, "loaded_all_steps", False) and self._final():
                return None
            if waiting():
                return None

    def _final(self) -> bool:
        # Training ended between the two checks above: one more reload sees everything.
        self._refresh()
        return bisect.bisect_left(self.known, self.pos) >= len(self.known)

    def advance_past(self, step: int) -> None:
        self.pos = step + 1


def _watches_wait(rule: Any) -> bool:
    """Whether the rule overrides check_while_waiting (and so bounds its own waits)."""
    method = getattr(type(rule), "check_while_waiting", None)
    return method is not None and method is not Rule.check_while_waiting


def wait_limit(rule: Any, timeout: float | None) -> float | None:
    """Seconds `invoke_rule` waits for a new step before giving up (None: no limit)."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout={timeout!r} must be a non-negative number of seconds")
        return float(timeout)
    if _watches_wait(rule):
        return None
    settings = getattr(unwrap(rule.base_trial), "settings", None)
    limit = getattr(settings, "timeout_s", None)
    return float(limit) if isinstance(limit, (int, float)) else None


def invoke_rule(
    rule_obj: Any,
    start_step: int | None = 0,
    end_step: int | None = None,
    raise_eval_cond: bool = False,
    *,
    stop_event: threading.Event | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float | None = None,
    on_step_start: Callable[[int], None] | None = None,
    on_wait: Callable[[int, float], None] | None = None,
) -> RuleResult:
    """Evaluate `rule_obj` (smdebug's parameter name) step by step; returns a `RuleResult`
    (see the module docstring). Raises `TrialDataTimeout` when no new step comes within
    `timeout` seconds and training has not ended."""
    rule = rule_obj
    name = getattr(rule, "rule_name", type(rule).__name__)
    start = 0 if start_step is None else int(start_step)
    logger.info("Started execution of rule %s at step %d", name, start)
    result = RuleResult(rule_name=name, status=NO_ISSUES_FOUND)
    trial = unwrap(rule.base_trial)
    cursor = _StepCursor(trial, start)
    interval = poll_interval()
    limit = wait_limit(rule, timeout)
    fired_while_waiting: list[int] = []
    wait_started = [time.monotonic()]

    def waiting() -> bool:
        """One poll period; True means stop waiting (stop requested or the rule fired)."""
        if stop_event is not None and stop_event.is_set():
            return True
        check = getattr(rule, "check_while_waiting", None)
        if check is not None and check(cursor.pos, result.last_step):
            fired_while_waiting.append(result.last_step if result.last_step is not None else start)
            return True
        waited = time.monotonic() - wait_started[0]
        if on_wait is not None:
            on_wait(cursor.pos, waited)
        if limit is not None and waited >= limit:
            raise TrialDataTimeout(str(getattr(trial, "path", trial)), waited,
                                   _awaited(result.last_step, cursor.pos))
        pause = interval if limit is None else min(interval, max(0.0, limit - waited))
        if stop_event is not None:
            return stop_event.wait(pause)
        time.sleep(pause)
        return False

    try:
        while True:
            if stop_event is not None and stop_event.is_set():
                result.status = STOPPED
                break
            if end_step is not None and cursor.pos >= end_step:
                break  # no need to wait for a step that would not be evaluated
            wait_started[0] = time.monotonic()
            step = cursor.next_step(waiting)
            if fired_while_waiting:
                rule.fire(fired_while_waiting[0])  # raises RuleEvaluationConditionMet
            if step is None:
                if stop_event is not None and stop_event.is_set():
                    result.status = STOPPED
                break
            if end_step is not None and step >= end_step:
                break
            met: RuleEvaluationConditionMet | None = None
            if isinstance(rule, Rule):
                rule.mark_step_complete(step)  # listed by trial.steps(): no wait needed
            if on_step_start is not None:
                on_step_start(step)
            try:
                rule.invoke(step)
            except SKIPPED_EXCEPTIONS as e:
                logger.debug("Rule %s skipped step %d: %s", name, step, e)
            except RuleEvaluationConditionMet as e:
                met = e
            result.steps_evaluated += 1
            result.last_step = step
            cursor.advance_past(step)
            if on_progress is not None:
                on_progress(result.steps_evaluated, step)
            if met is not None:
                raise met
    except RuleEvaluationConditionMet as e:
        if raise_eval_cond:
            raise
        logger.info("Rule %s: %s", name, e)
        result.status = ISSUES_FOUND
        result.step = e.step
        result.message = str(e)
    except NoMoreData as e:
        logger.debug("Rule %s: %s", name, e)
    except NoMoreProfilerData as e:
        logger.info("No more profiler data for rule %s at timestamp %s", name, e.timestamp)
    logger.info("Ended execution of rule %s at end_step %s (%s)", name, result.last_step,
                result.status)
    return result


def _awaited(last_step: int | None, next_pos: int) -> str:
    """What a timed-out wait was for, in TrialDataTimeout's words ("No <what> appeared ...")."""
    if last_step is None:
        return f"step at or after step {next_pos} (no training_job_end.ts yet)"
    return f"new step after step {last_step} (no training_job_end.ts yet)"
