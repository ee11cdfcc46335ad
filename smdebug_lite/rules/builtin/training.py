"""StalledTrainingRule: no new step for too long while training is still running."""

from __future__ import annotations

import time
from typing import Any

from smdebug_lite.rules.actions import StopTrainingAction
from smdebug_lite.rules.builtin._common import BuiltinRule
from smdebug_lite.rules.params import is_unset, parse_bool, parse_float


class StalledTrainingRule(BuiltinRule):
    """Fires when no new step has been saved for `threshold` seconds while training has not
    ended (no ``training_job_end.ts``).

    Time is measured by the rule as steps arrive, so it detects stalls while the job runs; a
    trial evaluated after training ended never fires. The condition is reported at the last
    step saved before the stall. With `stop_training_on_fire`, the training job named by
    `training_job_name_prefix` is stopped (SageMaker StopTraining action) when it fires.

    Parameters: ``threshold`` (seconds, default 1800), ``stop_training_on_fire`` (False),
    ``training_job_name_prefix`` (required when stopping). Collections: any saved regularly
    (the docs use ``losses``).
    """

    def __init__(self, base_trial: Any, threshold: str = "1800",
                 stop_training_on_fire: str = "False", training_job_name_prefix: str | None = None,
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.threshold = parse_float(r, "threshold", threshold, min_value=0.0)
        self.stop_training_on_fire = parse_bool(r, "stop_training_on_fire",
                                                stop_training_on_fire)
        prefix = None if is_unset(training_job_name_prefix) else str(training_job_name_prefix)
        if self.stop_training_on_fire:
            if prefix is None:
                raise ValueError(f"{r}: stop_training_on_fire=True needs "
                                 "training_job_name_prefix")
            self.actions.actions.append(StopTrainingAction(self.rule_name, prefix))
        self.training_job_name_prefix = prefix
        self.set_params(threshold=self.threshold,
                        stop_training_on_fire=self.stop_training_on_fire,
                        training_job_name_prefix=prefix)
        self._last_progress: float | None = None

    def invoke_at_step(self, step: int) -> bool:
        self._last_progress = time.monotonic()
        return False

    def check_while_waiting(self, next_step: int, last_step: int | None) -> bool:
        now = time.monotonic()
        if self._last_progress is None:
            self._last_progress = now
            return False
        idle = now - self._last_progress
        if idle > self.threshold:
            self.flag(last_step if last_step is not None else next_step,
                      f"no new step for {idle:.0f}s (> {self.threshold:g}s) after step "
                      f"{last_step}", idle_seconds=idle)
            return True
        return False
