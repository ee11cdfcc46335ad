"""Faults on the rule side: a rule that exits, credentials among the RuleParameters, trials
that stop growing. Each job is `python -m smdebug_lite.rule_runner` as a real subprocess with a
private ``--opt-ml`` root and a local copy of a golden trial (training writes no end marker where a
test needs a trial that is still "running").
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rule_runner_job import ROOT, OptMlJob

pytestmark = pytest.mark.container

TRIAL_SRC = ROOT / "tests" / "data" / "golden" / "pt_basic"  # steps 0..24, gradients each step
END_MARKER = "training_job_end.ts"

EXIT_RULE = '''\
import sys

from smdebug.rules.rule import Rule

if "{when}" == "import":
    sys.exit(3)


class ExitRule(Rule):
    def __init__(self, base_trial, threshold="0.5"):
        super().__init__(base_trial)
        self.threshold = float(threshold)
        if "{when}" == "constructor":
            raise KeyboardInterrupt

    def invoke_at_step(self, step):
        if step == 12:
            sys.exit(3)
        return False
'''

LEAKY_RULE = '''\
import logging
import os

from smdebug.rules.rule import Rule


class LeakyRule(Rule):
    """Quotes every credential it was given: in logs, print(), and its exception."""

    def __init__(self, base_trial, threshold, db_password, api_token):
        super().__init__(base_trial)
        self.threshold = float(threshold)
        self.db_password = db_password
        self.api_token = api_token

    def invoke_at_step(self, step):
        key = os.environ["AWS_SECRET_ACCESS_KEY"]
        self.logger.info("step %d: logging in with %s / %s / %s", step, key, self.db_password,
                         self.api_token)
        logging.getLogger("user.rule").warning("plain logging: %s %s", self.db_password, key)
        print("printed:", self.api_token, key, flush=True)
        if step == 3:
            raise RuntimeError(f"login refused for {key} with password {self.db_password} "
                               f"and token {self.api_token}")
        return False
'''

BLOCKING_RULE = '''\
import threading

from smdebug.rules.rule import Rule


class BlockingRule(Rule):
    def invoke_at_step(self, step):
        threading.Event().wait()  # a call that never returns
'''

WAIT_INSIDE_RULE = '''\
from smdebug.rules.rule import Rule


class LookAheadRule(Rule):
    def invoke_at_step(self, step):
        self.base_trial.wait_for_steps([step + 100])  # a step training never writes
        return False
'''

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "AKIAxxxxSECRET",
    "db_password": "hunter2",
    "api_token": "tok-5f3c9a77e1",
}


def make_trial(tmp_path: Path, *, end: bool = True, steps: bool = True,
               collections: bool = True) -> Path:
    trial = tmp_path / "trial"
    shutil.copytree(TRIAL_SRC, trial)
    if not end:
        (trial / END_MARKER).unlink()
    if not steps:
        shutil.rmtree(trial / "events")
        shutil.rmtree(trial / "index")
    if not collections:
        shutil.rmtree(trial / "collections")
    return trial


class Job(OptMlJob):
    """One runner subprocess with its own opt-ml root."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(tmp_path, "Fault")
        self.env = {**self.base_env(tmp_path), "RULE_CONFIGURATION_NAME": self.name, **(env or {})}

    def run(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "smdebug_lite.rule_runner",
                               "--opt-ml", str(self.opt_ml), *args],
                              env=self.env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
        self.elapsed = time.monotonic() - started
        self.stdout, self.stderr = proc.stdout, proc.stderr
        return proc

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def assert_error(self, proc: subprocess.CompletedProcess[str], pattern: str) -> str:
        assert proc.returncode == 2, self.output
        message = self.message()
        assert message is not None and re.match(pattern, message), (message, self.output)
        assert self.failure() == message
        doc = self.status()
        assert (doc["status"], doc["exit_code"], doc["message"]) == ("Error", 2, message)
        return message


# --- a rule that exits --------------------------------------------------------------------


@pytest.mark.parametrize("when, expected", [
    ("step", r"ClientError: rule ExitRule \(exit_rule\.py\) called sys\.exit\(3\) at step 12\n"),
    ("import", r"ClientError: rule ExitRule \(exit_rule\.py\) called sys\.exit\(3\) while its "
               r"source was imported\n"),
    ("constructor", r"ClientError: rule ExitRule \(exit_rule\.py\) raised KeyboardInterrupt in "
                    r"its constructor\n"),
])
def test_rule_exit_is_an_error_naming_rule_and_exit(tmp_path, when, expected) -> None:
    source = tmp_path / "exit_rule.py"
    source.write_text(EXIT_RULE.format(when=when))
    job = Job(tmp_path)
    proc = job.run("--rule", "ExitRule", "--source", str(source),
                   "--base-trial", str(make_trial(tmp_path)))
    message = job.assert_error(proc, expected)
    assert "Traceback (most recent call last)" in message
    doc = job.status()
    assert doc["error_type"] == ("KeyboardInterrupt" if when == "constructor" else "SystemExit")
    if when == "step":
        assert (doc["steps_evaluated"], doc["last_step"]) == (12, 11)
    assert "finished: Error" in job.stdout


# --- credentials --------------------------------------------------------------------------


def test_secrets_never_leave_the_runner(tmp_path) -> None:
    source = tmp_path / "leaky_rule.py"
    source.write_text(LEAKY_RULE)
    job = Job(tmp_path, env={"AWS_SECRET_ACCESS_KEY": SECRETS["AWS_SECRET_ACCESS_KEY"],
                             "db_password": SECRETS["db_password"]})
    config = job.opt_ml / "config" / "processingjobconfig.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"Environment": {"api_token": SECRETS["api_token"],
                                                  "rule_to_invoke": "LeakyRule"}}))
    proc = job.run("--source", str(source), "--base-trial", str(make_trial(tmp_path)),
                   "--param", "threshold=0.1234")
    job.assert_error(proc, r"ClientError: rule LeakyRule raised RuntimeError "
                           r"\(last step evaluated: 2\): login refused for \*\*\* with password "
                           r"\*\*\* and token \*\*\*\n")
    everything = {"stdout": job.stdout, "stderr": job.stderr, "message": job.message(),
                  "failure": job.failure(), "status file": job.status_text()}
    for where, text in everything.items():
        for name, value in SECRETS.items():
            assert value not in (text or ""), f"{name}'s value appears in {where}:\n{text}"
    # the rule really logged, printed and raised them (and non-secrets stay visible)
    assert "logging in with *** / *** / ***" in job.stdout
    assert "printed: *** ***" in job.stdout
    assert "plain logging: *** ***" in job.stderr
    assert "'threshold': '0.1234'" in job.stdout
    assert "'db_password': '***'" in job.stdout and "'api_token': '***'" in job.stdout


def test_constructor_error_shows_parameters_without_secrets(tmp_path) -> None:
    source = tmp_path / "leaky_rule.py"
    source.write_text(LEAKY_RULE)
    job = Job(tmp_path, env={"AWS_SECRET_ACCESS_KEY": SECRETS["AWS_SECRET_ACCESS_KEY"]})
    proc = job.run("--rule", "LeakyRule", "--source", str(source),
                   "--base-trial", str(make_trial(tmp_path)), "-p", "threshold=abc",
                   "-p", f"db_password={SECRETS['db_password']}",
                   "-p", f"api_token={SECRETS['api_token']}")
    message = job.assert_error(
        proc, r"ClientError: cannot create rule LeakyRule with parameters \(api_token='\*\*\*', "
              r"db_password='\*\*\*', threshold='abc'\): ValueError")
    for value in SECRETS.values():
        assert value not in job.output + message + job.status_text()


# --- bounded waits ------------------------------------------------------------------------
# (The seconds a message says were waited are measured: the timeout, or more on a loaded
# machine; the job's time bounds them.)


@pytest.mark.parametrize("case, expected", [
    ("steps_without_end_marker",
     r"ClientError: rule VanishingGradient timed out: no new step after step 24 \(no "
     r"training_job_end\.ts yet\) appeared under {path} after waiting \d+s "
     r"\(last step evaluated: 24; trial timeout 5s"),
    ("collections_only",
     r"ClientError: rule VanishingGradient timed out: no step at or after step 0 \(no "
     r"training_job_end\.ts yet\) appeared under {path} after waiting \d+s "
     r"\(no step evaluated; trial timeout 5s"),
    ("nothing_written",
     r"ClientError: No debugging data appeared in base trial {path}: No collection files "
     r"appeared under {path} after waiting \d+s"),
])
def test_trial_timeout_ends_the_job(tmp_path, case, expected) -> None:
    trial = make_trial(tmp_path, end=False, steps=case == "steps_without_end_marker",
                       collections=case != "nothing_written")
    job = Job(tmp_path)
    proc = job.run("--rule", "VanishingGradient", "--base-trial", str(trial),
                   "-p", "threshold=1e-30", "--trial-timeout", "5", timeout=60)
    job.assert_error(proc, expected.format(path=re.escape(str(trial))))
    assert job.elapsed < 20, f"took {job.elapsed:.0f}s:\n{job.output}"


def test_trial_timeout_from_environment_bounds_a_wait_inside_the_rule(tmp_path) -> None:
    source = tmp_path / "look_ahead.py"
    source.write_text(WAIT_INSIDE_RULE)
    trial = make_trial(tmp_path, end=False)
    job = Job(tmp_path, env={"SMDEBUG_TRIAL_TIMEOUT": "3"})
    proc = job.run("--rule", "LookAheadRule", "--source", str(source), "--base-trial",
                   str(trial), timeout=60)
    job.assert_error(proc, rf"ClientError: rule LookAheadRule \(look_ahead\.py\) timed out: no "
                           rf"step 100 of mode GLOBAL (\(trial 'trial'\) )?appeared under "
                           rf"{re.escape(str(trial))} "
                           r"after waiting \d+s \(no step evaluated; trial timeout 3s")
    assert job.elapsed < 20, f"took {job.elapsed:.0f}s:\n{job.output}"


def test_a_rule_that_never_returns_is_reported(tmp_path) -> None:
    source = tmp_path / "blocking_rule.py"
    source.write_text(BLOCKING_RULE)
    trial = make_trial(tmp_path)
    job = Job(tmp_path)
    proc = job.run("--rule", "BlockingRule", "--source", str(source), "--base-trial",
                   str(trial), "--trial-timeout", "2", timeout=60)
    job.assert_error(proc, rf"ClientError: rule BlockingRule \(blocking_rule\.py\) made no "
                           rf"progress for 1\ds while evaluating step 0 \(base trial "
                           rf"{re.escape(str(trial))}; trial timeout 2s plus 10s grace\)")
    assert job.elapsed < 30, f"took {job.elapsed:.0f}s:\n{job.output}"


# --- the library's own bound, in-process --------------------------------------------------


def test_invoke_rule_raises_trial_data_timeout(tmp_path) -> None:
    from smdebug_lite.exceptions import TrialDataTimeout
    from smdebug_lite.rules import invoke_rule
    from smdebug_lite.rules.builtin import get_builtin_rule
    from smdebug_lite.trials import create_trial

    trial = make_trial(tmp_path, end=False)
    rule = get_builtin_rule("VanishingGradient")(create_trial(str(trial), timeout=0.5),
                                                 threshold="1e-30")
    progress: list[int] = []
    with pytest.raises(TrialDataTimeout) as info:
        invoke_rule(rule, on_progress=lambda n, step: progress.append(step))
    assert progress == list(range(25))
    assert info.value.path == str(trial)
    assert info.value.what == "new step after step 24 (no training_job_end.ts yet)"
    with pytest.raises(TrialDataTimeout):  # an explicit timeout wins over the trial's
        invoke_rule(get_builtin_rule("VanishingGradient")(create_trial(str(trial), timeout=600),
                                                          threshold="1e-30"), timeout=0.2)


def test_a_rule_watching_the_wait_keeps_its_own_limit(tmp_path) -> None:
    """StalledTrainingRule fires after its threshold even when that exceeds the trial's timeout."""
    from smdebug_lite.rules import invoke_rule
    from smdebug_lite.rules.builtin import get_builtin_rule
    from smdebug_lite.trials import create_trial

    trial = create_trial(str(make_trial(tmp_path, end=False)), timeout=0.2)
    result = invoke_rule(get_builtin_rule("StalledTrainingRule")(trial, threshold="1"))
    assert (result.status, result.step) == ("IssuesFound", 24)
