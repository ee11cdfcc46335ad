"""Working over many trials: finding a sweep's trials (`trial_set`), and evaluating rule jobs
here or on a Ray cluster (`evaluate_jobs` in `engines`; `ray_engine` runs them on Ray).
Importing this package does not import Ray."""

from __future__ import annotations

from smdebug_lite.distributed.engines import EngineUnavailable, evaluate_jobs
from smdebug_lite.distributed.trial_set import expand_trials, trial_names
from smdebug_lite.rule_runner.evaluation import RuleJob, RuleOutcome, evaluate_job, outcome_dict

__all__ = ["EngineUnavailable", "RuleJob", "RuleOutcome", "evaluate_job", "evaluate_jobs",
           "expand_trials", "outcome_dict", "trial_names"]
