"""``smdebug-lite watch TRIAL``: a running trial followed live, rules evaluated as steps arrive.

It may start before training does, and waits for the trial to appear. It ends when training
ends (``training_job_end.ts``, and every rule has evaluated every step), or when nothing new
arrived for ``--timeout`` seconds. Exit codes are the rule container's: 0 NoIssuesFound, 1 a
rule found issues, 2 a rule ended in Error or the trial stopped being written (or never
appeared) within the timeout, 130 interrupted.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import EXIT_ERROR, fail, handled
from smdebug_lite.cli.live_trial import LiveTrial
from smdebug_lite.cli.options import Trial
from smdebug_lite.cli.rule_watch import RuleWatch
from smdebug_lite.cli.rules import (
    ActionJson,
    Params,
    RuleFile,
    build_jobs,
    exit_code,
    parse_params,
    read_action_json,
)
from smdebug_lite.cli.watch_view import panel, progress_line, rule_text, steps_text

DEFAULT_WATCH_TIMEOUT_S = 600.0
EXIT_INTERRUPTED = 130  # the rule container's 128 + SIGINT
PLAIN_EVERY_S = 5.0  # default: plain progress lines at most this often (events at once)
STOP_WAIT_S = 5.0  # how long rules get to stop after a timeout

WatchRules = Annotated[list[str] | None, typer.Option(
    "--rule", help="built-in rule name, or the class name in --rule-file (repeatable)")]
WatchTimeout = Annotated[float, typer.Option(
    "--timeout", min=0.1,
    help="end (exit code 2) when nothing new arrives for this many seconds")]
Plain = Annotated[bool, typer.Option(
    "--plain", help="line-by-line updates without terminal control codes (logs, CI); the "
                    "default when stdout is not a terminal")]
Interval = Annotated[float, typer.Option(
    "--interval", min=0.05, help="seconds between looks at the trial")]
Every = Annotated[float, typer.Option(
    "--every", min=0, help="with --plain: seconds between progress lines (events such as a "
                           "rule's status are printed at once)")]


def check_rule_names(rules: list[str], rule_file: str | None) -> None:
    """Unknown built-in rules fail at once rather than after the whole training."""
    if rule_file is not None:
        return
    from smdebug_lite.rule_runner.params import ConfigError
    from smdebug_lite.rule_runner.source import load_builtin_rule

    for name in rules:
        try:
            load_builtin_rule(name)
        except ConfigError as e:
            fail(f"--rule {name}: {e}", EXIT_ERROR)


class PlainOutput:
    """Lines on stdout: progress every few seconds, events (trial opened, a rule's status, the
    first non-finite record, a failed read) as they happen."""

    def __init__(self, uri: str, timeout_s: float, every_s: float = PLAIN_EVERY_S) -> None:
        from smdebug_lite.cli.rule_watch import WAITING

        self.every_s = every_s
        self.last_line = float("-inf")
        self.said: dict[str, Any] = {"waiting_rule": WAITING}
        self.rule_steps: dict[int, int] = {}
        self.say(f"watching {uri} (timeout {timeout_s:g}s)")

    @staticmethod
    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _once(self, key: str, value: Any, line: str) -> None:
        if self.said.get(key, None) != value:
            self.said[key] = value
            self.say(line)

    def update(self, watcher: Watcher, changed: bool) -> None:
        state = watcher.live.state
        if not state.opened:
            self._once("waiting", True, f"waiting for a trial at {watcher.uri}")
        else:
            self._once("opened", True, "trial opened")
        rules = watcher.rules.rules
        for i, p in enumerate(rules):
            if self.said.get(f"rule{i}", self.said["waiting_rule"]) != p.status:
                self.rule_steps[i] = p.steps_evaluated
                self._once(f"rule{i}", p.status, rule_text(p))
        now = time.monotonic()
        first = self.last_line < 0
        if state.opened and state.steps and (first or changed and
                                             now - self.last_line >= self.every_s):
            self.last_line = now
            self.say(progress_line(state))
            for i, p in enumerate(rules):  # evaluation progress, as often
                if p.steps_evaluated != self.rule_steps.get(i) and not p.done:
                    self.rule_steps[i] = p.steps_evaluated
                    self.say(rule_text(p))
        if state.non_finite is not None:
            self._once("non_finite", state.non_finite,
                       f"first NaN/Inf: {state.non_finite.describe()}")
        if state.problem:
            self._once("problem", state.problem, f"read failed (retrying): {state.problem}")

    def close(self) -> None:
        return None


class LiveOutput:
    """The rich live panel, redrawn at every look."""

    def __init__(self) -> None:
        from rich.live import Live

        self.live = Live(console=console.out, refresh_per_second=4, transient=False,
                         auto_refresh=False)
        self.live.start()

    def update(self, watcher: Watcher, changed: bool) -> None:
        self.live.update(watcher.view(), refresh=True)

    def close(self) -> None:
        self.live.stop()


class Watcher:
    def __init__(self, uri: str, jobs: list[Any], timeout_s: float, interval_s: float) -> None:
        self.uri = uri
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.live = LiveTrial(uri, trial_timeout=timeout_s)
        self.rules = RuleWatch(jobs)
        self.started = time.monotonic()

    def idle_s(self) -> float:
        return time.monotonic() - max(self.live.last_new_data, self.rules.last_progress())

    def view(self) -> Any:
        return panel(self.uri, self.live.state, self.rules.rules, self.started, self.timeout_s,
                     self.idle_s())

    def run(self, output: PlainOutput | LiveOutput) -> str:
        """Follow the trial until training ends ("ended") or the timeout ("timeout")."""
        while True:
            changed = self.live.poll()
            if self.live.state.opened and not self.rules.started:
                self.rules.start()
            output.update(self, changed)
            if self.live.state.ended and self.rules.all_done():
                return "ended"
            if self.idle_s() >= self.timeout_s:
                return "timeout"
            time.sleep(self.interval_s)

    def closing_lines(self, how: str) -> list[str]:
        state = self.live.state
        if how == "ended":
            lines = [f"training ended: {steps_text(state)}"]
        elif how == "interrupted":
            lines = ["interrupted"]
        elif not state.opened:
            lines = [f"timed out: no trial appeared at {self.uri} within {self.timeout_s:g}s"]
        else:
            lines = [f"timed out: nothing new for {self.timeout_s:g}s and no end of training "
                     f"({steps_text(state)})"]
        if state.non_finite is not None:
            lines.append(f"first NaN/Inf: {state.non_finite.describe()}")
        lines += [rule_text(p) for p in self.rules.rules]
        return lines


def watch(trial: Trial, rule: WatchRules = None, param: Params = None,
          rule_file: RuleFile = None, action_json: ActionJson = None,
          timeout: WatchTimeout = DEFAULT_WATCH_TIMEOUT_S, plain: Plain = False,
          interval: Interval = 1.0, every: Every = PLAIN_EVERY_S) -> None:
    """Follow a trial while training writes it: steps per worker and mode, the step rate, the
    latest loss, where a NaN or Inf first appeared (when recorded), and each rule's status as
    it evaluates. Ends with training, or after --timeout seconds without new data. Exit code:
    0 no issues, 1 a rule found issues, 2 a rule failed or the timeout passed, 130 interrupted.

    Examples:

        smdebug-lite watch ./my-trial

        smdebug-lite watch s3://bucket/jobs/run1/debug-output --rule LossNotDecreasing

        smdebug-lite watch ./my-trial --rule ExplodingTensor --plain --timeout 300

        smdebug-lite watch ./my-trial --rule LossNotDecreasing --action-json @actions.json
    """
    with handled():
        rules = list(rule or [])
        check_rule_names(rules, rule_file)
        jobs = build_jobs([trial], rules, parse_params(param), rule_file, None, None,
                          read_action_json(action_json), trial_timeout=timeout)
    watcher = Watcher(trial, jobs, timeout, interval)
    use_plain = plain or not console.out.is_terminal
    output: PlainOutput | LiveOutput = (PlainOutput(trial, timeout, every) if use_plain
                                        else LiveOutput())
    try:
        how = watcher.run(output)
    except KeyboardInterrupt:
        how = "interrupted"
    finally:
        output.close()
    if how != "ended":
        watcher.rules.stop(STOP_WAIT_S)
    for line in watcher.closing_lines(how):
        PlainOutput.say(line)
    if how == "ended":
        code = exit_code(watcher.rules.statuses())
    else:
        code = EXIT_INTERRUPTED if how == "interrupted" else EXIT_ERROR
    PlainOutput.say(f"exit code {code}")
    raise typer.Exit(code)
