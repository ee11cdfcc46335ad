"""Rules over trials outside a rule container: one `RuleJob` per (trial, rule), evaluated in
this process by `evaluate_job`, ending in a `RuleOutcome`.

A job runs through the container's own code path (this package): its parameters are
RuleParameters strings, bound to the rule's constructor the same way, a custom rule is loaded
from its file the same way, and the status and message are the ones the container reports
(``/opt/ml/output/message``), so a local evaluation and a SageMaker rule job agree. Choosing an
engine for many jobs (here or on Ray) is `smdebug_lite.distributed.evaluate_jobs`.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smdebug_lite.rule_runner.params import (
    ACTION_JSON,
    BASE_TRIAL,
    END_STEP,
    RULE_TO_INVOKE,
    SOURCE,
    START_STEP,
    ConfigError,
    build_config,
)
from smdebug_lite.rule_runner.runner import RuleJob as RunnerJob
from smdebug_lite.rule_runner.runner import make_report
from smdebug_lite.rule_runner.source import ensure_smdebug_alias
from smdebug_lite.rule_runner.status import Outcome

NO_ISSUES_FOUND = "NoIssuesFound"
ISSUES_FOUND = "IssuesFound"
ERROR = "Error"

StepProgress = Callable[[int, int], None]  # (steps evaluated, step just evaluated)
# The logger rules log on (`Rule.logger`); built-in rules say there why their condition was met.
_RULES_LOGGER = "smdebug_lite.rules"


@dataclass(frozen=True)
class RuleJob:
    """One rule on one trial. `params` are RuleParameters (strings, as SageMaker passes them);
    `rule_file` holds the class named `rule` for a custom rule (a .py file or .tar.gz);
    steps are global steps, `end_step` exclusive; `action_json` the actions run when the
    condition is met (the container's `action_json`); `trial_timeout` how long to wait for a
    step that does not come (None: SMDEBUG_TRIAL_TIMEOUT, else the container's default)."""

    trial: str
    rule: str
    params: dict[str, str] = field(default_factory=dict)
    rule_file: str | None = None
    start_step: int | None = None
    end_step: int | None = None
    action_json: str | None = None
    trial_timeout: float | None = None


@dataclass(frozen=True)
class RuleOutcome:
    """How a job ended. `status` and `message` are what the rule container reports; `step` is
    where the condition was met; `evidence` is what the rule logged about it, when it did."""

    trial: str
    rule: str
    status: str  # "NoIssuesFound" | "IssuesFound" | "Error"
    message: str
    step: int | None = None
    evidence: str | None = None


def _location(uri: str) -> str:
    """Local paths made absolute (the runner maps only /opt/ml paths); URIs unchanged."""
    if "://" in uri:
        return uri
    return os.path.abspath(os.path.expanduser(uri))


def _cli_params(job: RuleJob) -> dict[str, str]:
    params = {str(k): str(v) for k, v in job.params.items()}
    reserved: dict[str, str] = {RULE_TO_INVOKE: job.rule, BASE_TRIAL: _location(job.trial)}
    if job.rule_file is not None:
        reserved[SOURCE] = _location(job.rule_file)
    if job.start_step is not None:
        reserved[START_STEP] = str(job.start_step)
    if job.end_step is not None:
        reserved[END_STEP] = str(job.end_step)
    if job.action_json:
        reserved[ACTION_JSON] = job.action_json
    return {**params, **reserved}


class _Evidence(logging.Filter):
    """Keeps what rules log while a step is evaluated, without showing more than the logger's
    level would (records below it are captured, then dropped)."""

    def __init__(self, shown_from: int) -> None:
        super().__init__()
        self.shown_from = shown_from
        self.lines: list[str] = []
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread == self.thread and record.levelno >= logging.INFO:
            self.lines.append(record.getMessage())
        return record.levelno >= self.shown_from

    def evidence(self) -> str | None:
        met = [line for line in self.lines if "condition met" in line]
        chosen = met or self.lines
        return "\n".join(chosen[-3:]) if chosen else None


class _LocalJob(RunnerJob):
    """The container's job, reporting steps to a progress callback and keeping evidence."""

    progress: StepProgress | None = None
    capture: _Evidence | None = None

    def on_step_start(self, step: int) -> None:
        if self.capture is not None:
            self.capture.lines.clear()
        super().on_step_start(step)

    def on_progress(self, steps_evaluated: int, step: int) -> None:
        super().on_progress(steps_evaluated, step)
        if self.progress is not None:
            self.progress(steps_evaluated, step)


@functools.cache
def _module_loggers() -> tuple[str, ...]:
    """The loggers of the rules package's modules (each logs on its module's name), imported
    yet or not."""
    root = Path(importlib.util.find_spec(_RULES_LOGGER).origin).parent
    return tuple(".".join((_RULES_LOGGER, *f.relative_to(root).with_suffix("").parts))
                 for f in sorted(root.rglob("*.py")) if f.name != "__init__.py")


class _RulesLoggerLevel:
    """The rules logger opened to INFO while any job captures its evidence: jobs may run on
    several threads at once (`smdebug-lite watch`), so the first to start saves the level and
    the last to end restores it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.saved = logging.NOTSET
        self.shown_from = logging.NOTSET  # the effective level before it was opened
        self.pinned: list[logging.Logger] = []

    def enter(self, logger: logging.Logger) -> int:
        """Open the logger; returns the level records were shown from before."""
        with self.lock:
            self.users += 1
            if self.users > 1:
                return self.shown_from
            shown_from = self.shown_from = logger.getEffectiveLevel()
            # Its children (the invoker's, the actions': those of modules not imported yet
            # made now) keep the level they had.
            for name in _module_loggers():
                logging.getLogger(name)
            self.pinned = [lg for n, lg in logging.Logger.manager.loggerDict.items()
                           if n.startswith(_RULES_LOGGER + ".") and isinstance(lg, logging.Logger)
                           and lg.level == logging.NOTSET]
            for lg in self.pinned:
                lg.setLevel(shown_from)
            self.saved = logger.level
            logger.setLevel(min(logging.INFO, shown_from))
            return shown_from

    def leave(self, logger: logging.Logger) -> None:
        with self.lock:
            self.users -= 1
            if self.users:
                return
            logger.setLevel(self.saved)
            for lg in self.pinned:
                lg.setLevel(logging.NOTSET)
            self.pinned = []


_LEVEL = _RulesLoggerLevel()


def evaluate_job(job: RuleJob, progress: StepProgress | None = None,
                 stop_event: threading.Event | None = None) -> RuleOutcome:
    """Run `job` in this process (and thread). Never raises for a bad rule, parameter or
    trial: those end as status Error with the container's message. Setting `stop_event` ends
    the evaluation between steps (status Stopped)."""
    ensure_smdebug_alias()  # custom rules written for smdebug import `smdebug`
    location = _location(job.trial)
    if "://" not in location and not os.path.isdir(location):
        # The container waits for a trial to appear; here nothing will write it.
        outcome = Outcome.error(f"cannot open base trial {job.trial}: no such directory")
        return RuleOutcome(job.trial, job.rule, outcome.status, outcome.message)
    environ = {k: v for k, v in os.environ.items() if k == "SMDEBUG_TRIAL_TIMEOUT"}
    with tempfile.TemporaryDirectory(prefix="smdebug-lite-rule-") as tmp:
        root = Path(tmp)
        try:
            cfg = build_config(environ=environ, cli_params=_cli_params(job),
                               opt_ml=str(root / "opt_ml"), output_dir=str(root / "status"),
                               trial_timeout=job.trial_timeout)
        except ConfigError as e:
            outcome = Outcome.error(str(e), e)
            return RuleOutcome(job.trial, job.rule, outcome.status, outcome.message)
        rules_logger = logging.getLogger(_RULES_LOGGER)
        capture = _Evidence(_LEVEL.enter(rules_logger))
        rules_logger.addFilter(capture)
        try:
            runner_job = _LocalJob(cfg, make_report(cfg), stop_event or threading.Event(),
                                   root / "work")
            runner_job.progress = progress
            runner_job.capture = capture
            (root / "work").mkdir()
            outcome = runner_job.run()
        finally:
            rules_logger.removeFilter(capture)
            _LEVEL.leave(rules_logger)
    evidence = capture.evidence() if outcome.status == ISSUES_FOUND else None
    return RuleOutcome(job.trial, job.rule, outcome.status, outcome.message,
                       outcome.step, evidence)


def outcome_dict(outcome: RuleOutcome) -> dict[str, Any]:
    """The outcome as plain JSON-ready data (for `--json` output and reports)."""
    return {
        "trial": outcome.trial, "rule": outcome.rule, "status": outcome.status,
        "step": outcome.step, "message": outcome.message, "evidence": outcome.evidence,
    }
