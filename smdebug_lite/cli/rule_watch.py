"""Rule jobs evaluated beside ``smdebug-lite watch``, each on a thread of its own, through the
rule runner's evaluation (`evaluate_job`): the status, step and evidence are the container's."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

WAITING = "Waiting"  # not started: the trial is not there yet
EVALUATING = "InProgress"


@dataclass
class RuleProgress:
    """One job as the watch shows it; written by its thread, read by the display."""

    job: Any  # rule_runner.evaluation.RuleJob
    status: str = WAITING
    steps_evaluated: int = 0
    last_step: int | None = None
    outcome: Any = None  # RuleOutcome once finished
    last_progress: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return str(self.job.rule)

    @property
    def done(self) -> bool:
        return self.outcome is not None

    def detail(self) -> str:
        """The evidence of an IssuesFound, the first line of an Error's message, else ''."""
        out = self.outcome
        if out is None:
            return ""
        if out.evidence:
            return str(out.evidence).strip().splitlines()[-1]
        lines = (out.message or "").strip().splitlines()
        return lines[0] if lines and out.status != "NoIssuesFound" else ""


class RuleWatch:
    def __init__(self, jobs: list[Any]) -> None:
        self.rules = [RuleProgress(job) for job in jobs]
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def started(self) -> bool:
        return bool(self._threads)

    def start(self) -> None:
        for progress in self.rules:
            thread = threading.Thread(target=self._run, args=(progress,), daemon=True,
                                      name=f"watch-rule-{progress.name}")
            self._threads.append(thread)
            progress.status = EVALUATING
            thread.start()

    def _run(self, progress: RuleProgress) -> None:
        from smdebug_lite.rule_runner.evaluation import RuleOutcome, evaluate_job

        def on_step(evaluated: int, step: int) -> None:
            progress.steps_evaluated, progress.last_step = evaluated, step
            progress.last_progress = time.monotonic()

        try:
            outcome = evaluate_job(progress.job, on_step, stop_event=self.stop_event)
        except Exception as e:  # evaluate_job reports failures itself; this is a last resort
            outcome = RuleOutcome(progress.job.trial, progress.name, "Error",
                                  f"{type(e).__name__}: {e}")
        progress.status = outcome.status
        progress.outcome = outcome

    def all_done(self) -> bool:
        return all(p.done for p in self.rules)

    def last_progress(self) -> float:
        return max((p.last_progress for p in self.rules), default=float("-inf"))

    def stop(self, wait_s: float) -> None:
        """Ask every job to stop between steps and wait for them, up to `wait_s` in all."""
        self.stop_event.set()
        deadline = time.monotonic() + wait_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def statuses(self) -> list[str]:
        return [p.status for p in self.rules]
