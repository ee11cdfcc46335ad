"""Working over many trials: finding a sweep's trials (`trial_set`), and evaluating rules on a
Ray cluster (`ray_engine`, reached through `smdebug_lite.rules.evaluation.evaluate_jobs` with
``engine="ray"``). Importing this package does not import Ray."""

from __future__ import annotations

from smdebug_lite.distributed.trial_set import expand_trials, trial_names

__all__ = ["expand_trials", "trial_names"]
