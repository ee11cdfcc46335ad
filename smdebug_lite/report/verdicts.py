"""Rule verdicts for the report: one row per rule job, with the step and evidence.

Jobs are `smdebug_lite.distributed.RuleJob`s and run through the same engine as
``smdebug-lite rules`` (the rule container's code path), so the report and the command line
print the same statuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smdebug_lite.distributed import RuleJob, evaluate_job

__all__ = ["RuleJob", "Verdict", "evaluate"]


@dataclass
class Verdict:
    """What the report prints for a rule job."""

    trial: str
    rule: str
    status: str  # NoIssuesFound | IssuesFound | Error
    message: str = ""
    step: int | None = None
    evidence: Any = None


def evaluate(job: Any, progress: Callable[[int, int], None] | None = None) -> Verdict:
    """The verdict of one job; `progress(steps_evaluated, step)` after each step."""
    if not all(hasattr(job, f) for f in ("trial", "rule", "params")):
        raise TypeError(f"rule job {job!r} is not a RuleJob (fields trial, rule, params, "
                        "rule_file, start_step, end_step)")
    outcome = evaluate_job(job, progress)
    return Verdict(str(outcome.trial), str(outcome.rule), str(outcome.status),
                   str(outcome.message or ""), outcome.step, outcome.evidence)
