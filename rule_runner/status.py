"""Reporting a rule job's outcome the way SageMaker reads it, plus a JSON file for humans/tests.

SageMaker derives ``RuleEvaluationStatus`` from the Processing job: exit code 0 is
NoIssuesFound, a failure is IssuesFound or Error, and the first 1,024 bytes of
``/opt/ml/output/message`` (and ``failure``) become ``StatusDetails``. The JSON status file
under the rule output folder is our own convention, so local runs need not guess.

Everything written passes `smdebug_lite.log.redact.redact` first, so a credential quoted by an
exception or a parameter never reaches StatusDetails.
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from smdebug_lite.log.redact import redact
from smdebug_lite.rule_runner import (
    EXIT_ERROR,
    EXIT_ISSUES_FOUND,
    EXIT_NO_ISSUES,
    EXIT_STOPPED_BASE,
)

IN_PROGRESS = "InProgress"
NO_ISSUES_FOUND = "NoIssuesFound"
ISSUES_FOUND = "IssuesFound"
ERROR = "Error"
STOPPED = "Stopped"

MAX_MESSAGE_BYTES = 1024  # SageMaker keeps only this much of the message/failure files


def truncate_utf8(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """At most `limit` UTF-8 bytes of `text`, never splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def issues_found_message(rule_class: str, step: int | None) -> str:
    from smdebug_lite.exceptions import RuleEvaluationConditionMet

    exc = RuleEvaluationConditionMet(rule_class, step if step is not None else -1)
    return truncate_utf8(f"{type(exc).__name__}: {exc}\n")


def error_message(cause: str, exc: BaseException | None = None) -> str:
    """``ClientError: <cause>`` and the traceback, credentials removed, cut to the size
    SageMaker keeps."""
    text = f"ClientError: {cause.strip()}\n"
    if exc is not None:
        text += "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return truncate_utf8(redact(text))


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def safe_file_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("._") or "rule"
    return cleaned[:200]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Outcome:
    """The final state of one rule job."""

    status: str
    exit_code: int
    message: str = ""  # exactly what goes to /opt/ml/output/message ("" for NoIssuesFound)
    step: int | None = None
    error_type: str | None = None

    @classmethod
    def no_issues(cls) -> Outcome:
        return cls(NO_ISSUES_FOUND, EXIT_NO_ISSUES)

    @classmethod
    def issues(cls, rule_class: str, step: int | None) -> Outcome:
        return cls(ISSUES_FOUND, EXIT_ISSUES_FOUND, issues_found_message(rule_class, step), step)

    @classmethod
    def error(cls, cause: str, exc: BaseException | None = None) -> Outcome:
        return cls(ERROR, EXIT_ERROR, error_message(cause, exc),
                   error_type=type(exc).__name__ if exc is not None else None)

    @classmethod
    def stopped(cls, signum: int, last_step: int | None) -> Outcome:
        where = f" after step {last_step}" if last_step is not None else ""
        return cls(STOPPED, EXIT_STOPPED_BASE + signum,
                   f"Stopped: rule evaluation was stopped by signal {signum}{where}\n")


@dataclass
class StatusReport:
    """Progress and outcome, written to ``<output_dir>/<name>.json`` and the message files."""

    name: str
    rule: str | None
    json_path: Path
    message_file: Path
    failure_file: Path
    base_trial: str | None = None
    status: str = IN_PROGRESS
    steps_evaluated: int = 0
    current_step: int | None = None
    started: float = field(default_factory=time.time)
    started_at: str = field(default_factory=_now)

    def clear_previous(self) -> None:
        """Remove message files left by an earlier run in the same folder."""
        for p in (self.message_file, self.failure_file):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def document(self, outcome: Outcome | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "rule_configuration_name": self.name,
            "rule": self.rule,
            "status": outcome.status if outcome else self.status,
            "step": outcome.step if outcome else None,
            "message": redact(outcome.message) if outcome else "",
            "exit_code": outcome.exit_code if outcome else None,
            "error_type": outcome.error_type if outcome else None,
            "steps_evaluated": self.steps_evaluated,
            "last_step": self.current_step,
            "base_trial": redact(self.base_trial) if self.base_trial else self.base_trial,
            "started_at": self.started_at,
            "updated_at": _now(),
            "ended_at": _now() if outcome else None,
            "elapsed_s": round(time.time() - self.started, 3),
        }
        return doc

    def write_progress(self) -> None:
        atomic_write_text(self.json_path, json.dumps(self.document(), indent=2) + "\n")

    def write_final(self, outcome: Outcome) -> dict[str, Any]:
        """Message files first (what SageMaker reads), then the JSON status."""
        self.status = outcome.status
        message = truncate_utf8(redact(outcome.message))
        if message:
            atomic_write_text(self.message_file, message)
        if outcome.status in (ISSUES_FOUND, ERROR):
            atomic_write_text(self.failure_file, message)
        doc = self.document(outcome)
        atomic_write_text(self.json_path, json.dumps(doc, indent=2) + "\n")
        return doc

