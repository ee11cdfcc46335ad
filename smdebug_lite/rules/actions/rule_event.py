"""What actions are told when a rule fires: the rule, its status, the step, the trial and what
the rule found. SNS messages and stop signals take the message text; webhooks take it all."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

ISSUES_FOUND = "IssuesFound"


@dataclass(frozen=True)
class RuleEvent:
    """`evidence` is the rule's own account of the condition (a built-in rule's reason), when
    it gave one; `trial` the base trial's path or URI; `time` epoch seconds."""

    rule: str
    status: str = ISSUES_FOUND
    step: int | None = None
    trial: str | None = None
    message: str = ""
    evidence: str | None = None
    time: float = field(default_factory=time.time)


def evidence_of(report: Any) -> str | None:
    """The reason a rule recorded in its report (``report["Details"]["reason"]``), if any."""
    details = report.get("Details") if isinstance(report, dict) else None
    reason = details.get("reason") if isinstance(details, dict) else None
    return str(reason) if reason else None
