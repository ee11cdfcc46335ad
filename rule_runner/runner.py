"""One rule job: load the rule, open the trials, bind the constructor, evaluate, report.

`RuleJob.run()` does the work and may block (waiting for a trial that is still being written),
so `run_job()` runs it on a worker thread and keeps the main thread free for signals: SIGTERM
sets the stop event that `invoke_rule` watches, and if the worker does not return within the
grace period the job is reported Stopped anyway.

Every wait is bounded by the trial timeout: `create_trial` and `invoke_rule` raise
`TrialDataTimeout` themselves, and the main thread reports Error when the worker shows no sign
of life (a step started or evaluated, a poll while waiting) for the timeout plus a grace
period, e.g. a rule stuck in a call that never returns. A rule that ends its thread with
``sys.exit()`` or another BaseException is reported as Error naming the rule and the exit.
"""

from __future__ import annotations

import inspect
import logging
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smdebug_lite.log.redact import redact_mapping, redact_value
from smdebug_lite.rule_runner.params import RULE_TO_INVOKE, ConfigError, RunnerConfig
from smdebug_lite.rule_runner.source import load_builtin_rule, load_user_rule
from smdebug_lite.rule_runner.status import Outcome, StatusReport, safe_file_name

log = logging.getLogger("rule_runner")

_BASE_TRIAL_NAMES = ("base_trial", "trial")
# A rule job may start long before training writes its first step (data download, setup), so
# it waits longer than the library's default before declaring that no data will come.
DEFAULT_TRIAL_TIMEOUT_S = 3600.0


def stuck_grace_s(timeout: float) -> float:
    """Slack beyond the trial timeout before a silent worker is declared stuck: the library's
    own waits end at the timeout, and a few more seconds cover the calls around them."""
    return min(60.0, max(10.0, 0.1 * timeout))


def describe_exit(exc: BaseException) -> str:
    """``called sys.exit(3)`` / ``raised KeyboardInterrupt``: how a BaseException left the rule."""
    if isinstance(exc, SystemExit):
        return "called sys.exit()" if exc.code is None else f"called sys.exit({exc.code!r})"
    text = str(exc)
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


class RuleConstructionError(ConfigError):
    """The rule's constructor rejected its arguments (usually a bad parameter value)."""


@dataclass
class BoundArguments:
    args: list[Any]
    kwargs: dict[str, Any]
    parameters: dict[str, str]  # the RuleParameters passed (strings), for logs


def bind_arguments(cls: type, base_trial: Any, other_trials: list[Any], cfg: RunnerConfig
                   ) -> BoundArguments:
    """Arguments for ``cls(...)`` chosen from its signature, like smdebug's rule invoker did.

    The base trial goes first; ``other_trials`` and ``action_str`` only if declared (or the
    class takes ``**kwargs``); every other declared name is looked up among the parameters.
    """
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"cannot read the constructor signature of {cls.__name__}: {e}") from e
    params = list(sig.parameters.values())
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}

    base_param = next((p for p in params if p.name in _BASE_TRIAL_NAMES), None)
    if positional and (base_param is None or base_param is positional[0]):
        base_param = positional[0]
        args.append(base_trial)
    elif base_param is not None:
        kwargs[base_param.name] = base_trial
    elif var_kw:
        kwargs["base_trial"] = base_trial
    else:
        raise ConfigError(f"rule {cls.__name__} takes no base trial argument")

    names = {p.name for p in named}
    if "other_trials" in names or var_kw:
        if other_trials:
            kwargs["other_trials"] = list(other_trials)
    elif other_trials:
        log.warning("Rule %s does not take other_trials; ignoring %d other trial(s)",
                    cls.__name__, len(other_trials))
    action_param = sig.parameters.get("action_str")
    if cfg.action_json:
        if action_param is not None or var_kw:
            kwargs["action_str"] = cfg.action_json
        else:
            log.warning("Rule %s does not take action_str; action_json is ignored", cls.__name__)
    elif action_param is not None and action_param.default is action_param.empty:
        kwargs["action_str"] = ""  # smdebug >= 1.0.9 made it required; empty means no actions

    accepted = names - set(kwargs) - {base_param.name}
    values = cfg.rule_parameters(accepted, var_kw)
    for key in set(values) - set(kwargs):
        kwargs[key] = values[key]

    missing = [p.name for p in params
               if p.default is p.empty and p is not base_param
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.name not in kwargs]
    if missing:
        what = ", ".join(repr(m) for m in missing)
        if "other_trials" in missing:
            raise ConfigError(f"rule {cls.__name__} needs other trials: set other_trial_0 "
                              "(or other_trials) to the path or s3:// URI of another trial")
        raise ConfigError(f"rule {cls.__name__} requires parameter {what}, "
                          "which is not among the RuleParameters")
    return BoundArguments(args, kwargs, values)


def _open_trial(location: str, cfg: RunnerConfig, role: str) -> Any:
    from smdebug_lite.exceptions import MissingCollectionFiles, TrialDataTimeout
    from smdebug_lite.trials import create_trial

    kwargs: dict[str, Any] = {}
    if cfg.start_step is not None or cfg.end_step is not None:
        kwargs["range_steps"] = (cfg.start_step, cfg.end_step)
    kwargs["timeout"] = DEFAULT_TRIAL_TIMEOUT_S if cfg.trial_timeout is None else cfg.trial_timeout
    log.info("Opening %s %s (waiting for its data if training has not written any yet)",
             role, location)
    try:
        return create_trial(location, **kwargs)
    except MissingCollectionFiles as e:
        raise ConfigError(
            f"No debugging data was saved by the training job: training ended and no collection "
            f"files were found in {role} {location} ({e})"
        ) from e
    except TrialDataTimeout as e:
        raise ConfigError(f"No debugging data appeared in {role} {location}: {e}") from e
    except Exception as e:
        raise ConfigError(f"cannot open {role} {location}: {type(e).__name__}: {e}") from e


class RuleJob:
    """The work of one rule job; `run()` returns the Outcome and never raises."""

    def __init__(self, cfg: RunnerConfig, report: StatusReport, stop_event: threading.Event,
                 workdir: Path) -> None:
        self.cfg = cfg
        self.report = report
        self.stop_event = stop_event
        self.workdir = workdir
        self.phase = "starting"
        self.last_progress = time.monotonic()
        self.last_sign_of_life = self.last_progress  # progress, a step started, a poll
        self.step_in_progress: int | None = None
        self.rule_label = f"rule {cfg.rule_to_invoke or '?'}" + self._source_hint(None)
        self._last_log = 0.0
        self.dirty = False

    @property
    def timeout_s(self) -> float:
        return DEFAULT_TRIAL_TIMEOUT_S if self.cfg.trial_timeout is None else self.cfg.trial_timeout

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.last_sign_of_life = time.monotonic()

    def _source_hint(self, cls: type | None) -> str:
        """`` (my_rule.py)`` for a custom rule: the file defining it, relative to its package."""
        if not self.cfg.source:
            return ""
        name = Path(self.cfg.source.rstrip("/")).name
        if cls is not None:
            try:
                defined = Path(inspect.getfile(cls)).resolve()
            except (TypeError, OSError):
                defined = None
            if defined is not None:
                roots = [r for r in (self.workdir / "source", Path(self.cfg.source))
                         if r.is_dir()]
                name = defined.name
                for root in roots:
                    try:
                        name = defined.relative_to(root.resolve()).as_posix()
                        break
                    except (ValueError, OSError):
                        continue
        return f" ({name})"

    def _base_trial_location(self) -> str:
        if self.cfg.base_trial:
            return self.cfg.base_trial
        mounted = self.cfg.tensors_dir
        if mounted.is_dir():
            return str(mounted)
        raise ConfigError(
            f"no base trial: set the base_trial RuleParameter to the trial's s3:// URI or path, "
            f"or mount the trial at {mounted}"
        )

    def load_rule_class(self) -> type:
        name = self.cfg.rule_to_invoke
        if not name:
            raise ConfigError(f"{RULE_TO_INVOKE} is not set: give the name of the rule class "
                              "to run (a built-in rule, or a class in source_s3_uri)")
        if self.cfg.source:
            log.info("Loading rule %s from %s", name, self.cfg.source)
            return load_user_rule(self.cfg.source, name, self.workdir)
        log.info("Loading built-in rule %s", name)
        return load_builtin_rule(name)

    def on_step_start(self, step: int) -> None:
        self.step_in_progress = step
        self.last_sign_of_life = time.monotonic()

    def on_wait(self, next_step: int, waited_s: float) -> None:
        self.last_sign_of_life = time.monotonic()

    def on_progress(self, steps_evaluated: int, step: int) -> None:
        self.report.steps_evaluated = steps_evaluated
        self.report.current_step = step
        self.step_in_progress = None
        now = time.monotonic()
        self.last_progress = self.last_sign_of_life = now
        level = logging.INFO if now - self._last_log >= 2.0 or steps_evaluated <= 3 else logging.DEBUG
        if level == logging.INFO:
            self._last_log = now
        log.log(level, "Evaluated step %d (%d step(s) so far)", step, steps_evaluated)
        self.dirty = True  # the main thread rewrites the status file (one writer, no races)

    def run(self) -> Outcome:
        try:
            return self._run()
        except BaseException as e:  # sys.exit(), KeyboardInterrupt and the like from rule code
            return self.exit_outcome(e)

    def exit_outcome(self, exc: BaseException) -> Outcome:
        """Error naming the rule, its file and how and where it left (sys.exit, KeyboardInterrupt)."""
        if self.phase == "evaluating":
            if self.step_in_progress is not None:
                where = f" at step {self.step_in_progress}"
            else:
                last = self.report.current_step
                where = (" while waiting for the first step" if last is None
                         else f" while waiting for the step after {last}")
        elif self.phase == "loading the rule":
            where = " while its source was imported"
        elif self.phase == "creating the rule":
            where = " in its constructor"
        else:
            where = f" while {self.phase}"
        cause = f"{self.rule_label} {describe_exit(exc)}{where}"
        log.error("%s; reporting Error", cause[0].upper() + cause[1:])
        return Outcome.error(cause, exc)

    def timeout_outcome(self, exc: Exception) -> Outcome:
        """Error for a wait that ran out: which data, which trial, how long."""
        what = getattr(exc, "what", "data")
        path = getattr(exc, "path", self.report.base_trial)
        waited = float(getattr(exc, "waited_s", self.timeout_s))
        last = self.report.current_step
        evaluated = "no step evaluated" if last is None else f"last step evaluated: {last}"
        cause = (f"{self.rule_label} timed out: no {what} appeared under {path} after waiting "
                 f"{waited:.0f}s ({evaluated}; trial timeout {self.timeout_s:g}s, set with "
                 "--trial-timeout or SMDEBUG_TRIAL_TIMEOUT). Training may have stopped without "
                 "closing its hook, or saves steps less often than the timeout.")
        log.error("%s", cause)
        return Outcome.error(cause, exc)

    def stuck_outcome(self, silent_s: float) -> Outcome:
        """Error for a worker that gave no sign of life for longer than any bounded wait."""
        if self.phase == "evaluating" and self.step_in_progress is not None:
            doing = f"evaluating step {self.step_in_progress}"
        else:
            doing = self.phase
        trial = self.report.base_trial or self.cfg.base_trial or str(self.cfg.tensors_dir)
        cause = (f"{self.rule_label} made no progress for {silent_s:.0f}s while {doing} "
                 f"(base trial {trial}; trial timeout {self.timeout_s:g}s plus "
                 f"{stuck_grace_s(self.timeout_s):g}s grace); the rule or a read it made never "
                 "returned")
        log.error("%s; reporting Error", cause[0].upper() + cause[1:])
        return Outcome.error(cause)

    def _run(self) -> Outcome:
        from smdebug_lite.exceptions import TrialDataTimeout
        from smdebug_lite.rules import invoke_rule

        rule_name = self.cfg.rule_to_invoke or "rule"
        try:
            self.set_phase("loading the rule")
            cls = self.load_rule_class()
            rule_name = cls.__name__
            self.rule_label = f"rule {rule_name}{self._source_hint(cls)}"
            self.report.rule = rule_name
            self.set_phase("opening the trial")
            base_loc = self._base_trial_location()
            self.report.base_trial = base_loc
            base = _open_trial(base_loc, self.cfg, "base trial")
            others = [_open_trial(loc, self.cfg, f"other trial {i}")
                      for i, loc in enumerate(self.cfg.other_trials)]
            bound = bind_arguments(cls, base, others, self.cfg)
            log.info("Creating rule %s with parameters %s", rule_name,
                     redact_mapping(bound.parameters) if bound.parameters else "{}")
            self.set_phase("creating the rule")
            try:
                rule = cls(*bound.args, **bound.kwargs)
            except Exception as e:
                shown = ", ".join(f"{k}={redact_value(k, v)!r}"
                              for k, v in sorted(bound.parameters.items()))
                raise RuleConstructionError(
                    f"cannot create rule {rule_name} with parameters ({shown or 'none'}): "
                    f"{type(e).__name__}: {e}"
                ) from e
        except ConfigError as e:
            log.error("%s", e)
            return Outcome.error(str(e), e)
        except Exception as e:  # a bug in a library or in the rule's module
            log.exception("Failed while %s", self.phase)
            return Outcome.error(f"failed while {self.phase}: {type(e).__name__}: {e}", e)

        self.set_phase("evaluating")
        self.last_progress = time.monotonic()
        start = self.cfg.start_step or 0
        log.info("Evaluating rule %s from step %d to %s", rule_name, start,
                 self.cfg.end_step if self.cfg.end_step is not None else "the end of training")
        try:
            # An explicit timeout only: without one the trial's applies (opened with the
            # runner's default), and a rule watching the wait itself keeps its own limit.
            result = invoke_rule(rule, start, self.cfg.end_step, stop_event=self.stop_event,
                                 on_progress=self.on_progress, timeout=self.cfg.trial_timeout,
                                 on_step_start=self.on_step_start, on_wait=self.on_wait)
        except TrialDataTimeout as e:
            return self.timeout_outcome(e)
        except Exception as e:
            step = self.report.current_step
            where = f" (last step evaluated: {step})" if step is not None else ""
            log.exception("Rule %s raised %s%s", rule_name, type(e).__name__, where)
            return Outcome.error(f"rule {rule_name} raised {type(e).__name__}{where}: {e}", e)
        self.report.steps_evaluated = result.steps_evaluated
        self.report.current_step = result.last_step
        if result.status == "IssuesFound":
            return Outcome.issues(result.rule_name or rule_name, result.step)
        if result.status == "Stopped":
            return Outcome.stopped(signal.SIGTERM, result.last_step)
        if result.status == "Error":
            err = result.error
            cause = f"{type(err).__name__}: {err}" if err is not None else result.message
            return Outcome.error(f"rule {rule_name} failed: {cause}", err)
        return Outcome.no_issues()


def make_report(cfg: RunnerConfig) -> StatusReport:
    name = cfg.configuration_name or cfg.rule_to_invoke or "rule"
    return StatusReport(
        name=name,
        rule=cfg.rule_to_invoke,
        json_path=cfg.output_dir / f"{safe_file_name(name)}.json",
        message_file=cfg.message_file,
        failure_file=cfg.failure_file,
        base_trial=cfg.base_trial,
    )


def run_job(cfg: RunnerConfig, *, stop_grace_s: float = 5.0, wait_log_s: float = 30.0,
            install_signals: bool = True,
            on_started: Callable[[], None] | None = None) -> tuple[Outcome, dict[str, Any]]:
    """Run the job on a worker thread; returns the final Outcome and the status document."""
    report = make_report(cfg)
    report.clear_previous()
    report.write_progress()
    stop_event = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if signalled:  # a second signal: stop waiting for the worker
            signalled.append(signum)
            return
        log.warning("Received signal %d; stopping the rule evaluation", signum)
        signalled.append(signum)
        stop_event.set()

    previous: dict[int, Any] = {}
    if install_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)

    workdir = Path(tempfile.mkdtemp(prefix="rule-runner-"))
    job = RuleJob(cfg, report, stop_event, workdir)
    box: list[Outcome] = []
    worker = threading.Thread(target=lambda: box.append(job.run()), name="rule-job", daemon=True)
    try:
        worker.start()
        if on_started is not None:
            on_started()
        last_wait_log = last_write = time.monotonic()
        deadline: float | None = None
        stuck: Outcome | None = None
        silent_limit = job.timeout_s + stuck_grace_s(job.timeout_s)
        while worker.is_alive():
            worker.join(0.2)
            now = time.monotonic()
            silent = now - job.last_sign_of_life
            if not signalled and silent > silent_limit and worker.is_alive():
                stuck = job.stuck_outcome(silent)
                break
            if signalled and deadline is None:
                # Only a step in progress is worth waiting for; loading or opening is abandoned.
                deadline = now + (stop_grace_s if job.phase == "evaluating" else 0.0)
            if deadline is not None and (now >= deadline or len(signalled) > 1):
                log.warning("Rule evaluation did not stop within %.1fs; reporting Stopped",
                            stop_grace_s)
                break
            if job.dirty and now - last_write >= 1.0:
                job.dirty = False
                last_write = now
                try:
                    report.write_progress()
                except OSError as e:  # progress is best effort; the final report is not
                    log.debug("cannot write progress: %s", e)
            idle = now - max(job.last_progress, last_wait_log)
            if worker.is_alive() and not signalled and idle >= wait_log_s:
                last_wait_log = now
                if job.phase == "evaluating":
                    log.info("Waiting for data: no new step for %.0fs (last evaluated step: %s, "
                             "%d step(s) so far)", now - job.last_progress, report.current_step,
                             report.steps_evaluated)
                else:
                    log.info("Still %s (%.0fs)", job.phase, now - report.started)
        if signalled and (not box or box[0].status == "Stopped"):
            outcome = Outcome.stopped(signalled[0], report.current_step)
        elif stuck is not None and not box:
            outcome = stuck
        elif box:
            outcome = box[0]
        else:  # pragma: no cover - the worker always appends unless interrupted
            outcome = Outcome.error("the rule evaluation ended without a result")
        doc = report.write_final(outcome)
        log.info("Rule %s finished: %s%s (steps evaluated: %d, last step: %s, exit code %d)",
                 report.name, outcome.status,
                 f" at step {outcome.step}" if outcome.step is not None else "",
                 report.steps_evaluated, report.current_step, outcome.exit_code)
        if outcome.message and outcome.status != "NoIssuesFound":
            log.info("Status details: %s", outcome.message.splitlines()[0])
        return outcome, doc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not worker.is_alive():
            shutil.rmtree(workdir, ignore_errors=True)
        sys.stdout.flush()
