"""End-to-end rule jobs: `python -m smdebug_lite.rule_runner` as a real subprocess, as a container
would run.

Each job gets a private ``/opt/ml`` (a new mount namespace with a bind mount over /opt/ml, what
``docker run -v dir:/opt/ml`` gives a container), the trial and the rule source live in a real
S3 endpoint (moto's server), and the RuleParameters come from the SageMaker SDK's own
``Rule.custom(...).to_debugger_rule_config_dict()`` (sagemaker-core 2.x or sagemaker 2.x; where
neither is installed, an equivalent builder checked against the SDK by
`test_config_builder_matches_sdk` stands in).
"""

from __future__ import annotations

import importlib
import json
import re
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rule_runner_job import ROOT, OptMlJob
from waiting import wait_until

TRIAL_SRC = ROOT / "tests" / "data" / "golden" / "pt_basic"  # 25 steps (0..24), gradients saved at every step
ALL_STEPS = 25
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/smdebug-lite-rule-evaluator:test"
NAMESPACE_SCRIPT = (
    'set -e; mount --make-rprivate /; mkdir -p /opt/ml; mount --bind "$1" /opt/ml; '
    'shift; exec "$@"'
)

GRADIENT_RULE = (ROOT / "tests" / "gradient_rule.py").read_text()  # defines GradientMagnitude


# --- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(scope="session")
def private_opt_ml(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip (with the reason) where a mount namespace with a bind mount cannot be made."""
    probe = tmp_path_factory.mktemp("probe")
    (probe / "marker").write_text("x")
    try:
        proc = subprocess.run(["unshare", "-m", "sh", "-c", NAMESPACE_SCRIPT, "sh", str(probe),
                               "test", "-e", "/opt/ml/marker"],
                              capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("unshare(1) is not installed; these tests need a private /opt/ml mount")
    if proc.returncode != 0:
        pytest.skip("unshare -m with a bind mount over /opt/ml is not permitted here (needs root "
                    f"or CAP_SYS_ADMIN): {proc.stderr.strip()}")


def sdk_debugger(required: bool = True):
    """The SDK's debugger module: sagemaker-core 2.x, or sagemaker 2.x."""
    for name in ("sagemaker.core.debugger", "sagemaker.debugger"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    if required:
        pytest.skip("the SageMaker SDK is not installed (pip install sagemaker-core)")
    return None


def _config_without_sdk(name: str, source: str | None, rule_to_invoke: str | None,
                        params: dict[str, str] | None, other_trials: list[str] | None = None
                        ) -> dict[str, Any]:
    """What ``to_debugger_rule_config_dict()`` returns (key order included), for runs where the
    SDK cannot be installed; `test_config_builder_matches_sdk` keeps the two in step."""
    rule_params: dict[str, str] = {}
    for i, trial in enumerate(other_trials or []):
        rule_params[f"other_trial_{i}"] = trial
    if source is not None:
        rule_params["source_s3_uri"] = source
    if rule_to_invoke is not None:
        rule_params["rule_to_invoke"] = rule_to_invoke
    rule_params.update(params or {})
    return {"RuleConfigurationName": name, "RuleEvaluatorImage": IMAGE,
            "InstanceType": "ml.t3.medium", "VolumeSizeInGB": 1, "RuleParameters": rule_params}


def custom_rule_config(name: str, source: str | None, rule_to_invoke: str | None,
                       params: dict[str, str] | None = None, *, other_trials: list[str] | None = None,
                       use_sdk: bool = True) -> dict[str, Any]:
    """RuleParameters as the SageMaker SDK's ``Rule.custom(...)`` produces them."""
    sdk = sdk_debugger(required=False) if use_sdk else None
    if sdk is None:
        return _config_without_sdk(name, source, rule_to_invoke, params, other_trials)
    rule = sdk.Rule.custom(name=name, image_uri=IMAGE, instance_type="ml.t3.medium",
                           volume_size_in_gb=1, source=source, rule_to_invoke=rule_to_invoke,
                           rule_parameters=params, other_trials_s3_input_paths=other_trials)
    return rule.to_debugger_rule_config_dict()


def upload_trial(s3, bucket: str, prefix: str, steps: range | None = range(ALL_STEPS), *,
                 collections: bool = True, end: bool = True) -> str:
    """Copy (part of) the golden trial to S3: events before index files, end marker last."""
    files = sorted(p for p in TRIAL_SRC.rglob("*") if p.is_file())
    wanted = []
    for p in files:
        rel = p.relative_to(TRIAL_SRC).as_posix()
        m = re.match(r"(\d{12})_", p.name)
        if rel.startswith("collections/"):
            if collections:
                wanted.append((0, rel, p))
        elif m and steps is not None and int(m.group(1)) in steps:
            wanted.append((1 if rel.startswith("events/") else 2, rel, p))
    for _, rel, p in sorted(wanted, key=lambda w: (w[0], w[1])):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=p.read_bytes())
    if end:
        s3.put_object(Bucket=bucket, Key=f"{prefix}/training_job_end.ts", Body=b"")
    return f"s3://{bucket}/{prefix}"


def upload_text(s3, bucket: str, key: str, body: str | bytes) -> str:
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)
    return f"s3://{bucket}/{key}"


class RuleJob(OptMlJob):
    """One rule job's private /opt/ml on the host side, and how to start it."""

    def __init__(self, tmp_path: Path, s3_env: dict[str, str], config: dict[str, Any],
                 *, base_trial: str | None = None, as_job_config: bool = False,
                 extra_env: dict[str, str] | None = None) -> None:
        super().__init__(tmp_path, config["RuleConfigurationName"])
        params = dict(config["RuleParameters"])
        env = {
            **self.base_env(tmp_path),
            "SMDEBUG_TRIAL_REFRESH_INTERVAL": "0",
            "SMDEBUG_TRIAL_TIMEOUT": "30",
            "RULE_CONFIGURATION_NAME": self.name,
            **s3_env,
            **(extra_env or {}),
        }
        if as_job_config:  # what SageMaker Processing writes: Environment + the trial as input
            inputs = []
            if base_trial:
                inputs.append({"InputName": "tensors", "S3Input": {
                    "S3Uri": base_trial, "LocalPath": "/opt/ml/processing/input/tensors",
                    "S3DataType": "S3Prefix", "S3InputMode": "File"}})
            (self.opt_ml / "config").mkdir()
            (self.opt_ml / "config" / "processingjobconfig.json").write_text(json.dumps({
                "ProcessingJobName": f"job-{self.name.lower()}-0123abcd",
                "Environment": params,
                "ProcessingInputs": inputs,
                "AppSpecification": {"ImageUri": IMAGE},
            }))
        else:  # RuleParameters as environment variables
            env.update(params)
            if base_trial:
                env["base_trial"] = base_trial
        self.env = env

    def command(self, *args: str) -> list[str]:
        return ["unshare", "-m", "sh", "-c", NAMESPACE_SCRIPT, "sh", str(self.opt_ml),
                sys.executable, "-m", "smdebug_lite.rule_runner", *args]

    def run(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.command(*args), env=self.env, cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
        self.output = proc.stdout + proc.stderr
        return proc

    def start(self, *args: str) -> subprocess.Popen[str]:
        self.log_file = self.opt_ml.parent / "runner.log"
        self._log = open(self.log_file, "w")  # noqa: SIM115 - closed in wait()
        return subprocess.Popen(self.command(*args), env=self.env, cwd=ROOT, text=True,
                                stdout=self._log, stderr=subprocess.STDOUT)

    def wait(self, proc: subprocess.Popen[str], timeout: float = 90) -> int:
        try:
            return proc.wait(timeout=timeout)
        finally:
            self._log.close()
            self.output = self.log_file.read_text()

    def wait_for_status(self, predicate, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status_file.exists():
                doc = self.status()
                if predicate(doc):
                    return doc
            time.sleep(0.1)
        raise AssertionError(f"status never matched; last: {self.status_file.read_text()}")


@pytest.fixture
def s3(s3_endpoint):
    return s3_endpoint.client()


@pytest.fixture
def trial(s3, s3_bucket: str) -> str:
    return upload_trial(s3, s3_bucket, "my-job/debug-output")


@pytest.fixture
def rule_source(s3, s3_bucket: str) -> str:
    return upload_text(s3, s3_bucket, f"rules/{uuid.uuid4()}/gradient_rule.py", GRADIENT_RULE)


def _issues_message(rule: str, step: int) -> str:
    return (f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} "
            "resulted in the condition being met\n")


pytestmark = [pytest.mark.container, pytest.mark.usefixtures("private_opt_ml")]


# --- outcomes ------------------------------------------------------------------------------


def test_config_builder_matches_sdk(rule_source: str) -> None:
    sdk_debugger()  # skips without the SDK
    cases = [("GradientCheck", rule_source, "GradientMagnitude", {"threshold": "0.5"},
              ["s3://b/o0", "s3://b/o1"]),
             ("Plain", rule_source, "GradientMagnitude", None, None),
             ("Builtin", None, None, {"rule_to_invoke": "VanishingGradient"}, None)]
    for name, source, cls, params, others in cases:
        with_sdk = custom_rule_config(name, source, cls, params, other_trials=others)
        without = custom_rule_config(name, source, cls, params, other_trials=others, use_sdk=False)
        assert with_sdk == without
        assert list(with_sdk["RuleParameters"]) == list(without["RuleParameters"])
    assert custom_rule_config("GradientCheck", rule_source, "GradientMagnitude", {"threshold": "1"},
                              other_trials=["s3://b/o"])["RuleParameters"] == {
        "other_trial_0": "s3://b/o", "source_s3_uri": rule_source,
        "rule_to_invoke": "GradientMagnitude", "threshold": "1"}


def test_issues_found(tmp_path, s3_endpoint, trial, rule_source) -> None:
    config = custom_rule_config("GradientTooLarge", rule_source, "GradientMagnitude",
                                {"threshold": "0.000001", "start_step": "5"})
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=trial)
    proc = job.run()
    assert proc.returncode == 1, job.output
    expected = _issues_message("GradientMagnitude", 5)
    assert job.message() == expected
    assert job.failure() == expected
    doc = job.status()
    assert doc["rule_configuration_name"] == "GradientTooLarge"
    assert doc["rule"] == "GradientMagnitude"
    assert (doc["status"], doc["step"], doc["exit_code"]) == ("IssuesFound", 5, 1)
    assert doc["message"] == expected
    assert doc["steps_evaluated"] == 1 and doc["last_step"] == 5
    assert doc["elapsed_s"] >= 0 and doc["started_at"] and doc["ended_at"]
    assert "Evaluated step 5" in job.output


def test_no_issues_found(tmp_path, s3_endpoint, trial, rule_source) -> None:
    config = custom_rule_config("GradientOk", rule_source, "GradientMagnitude",
                                {"threshold": "1e9"})
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=trial)
    proc = job.run()
    assert proc.returncode == 0, job.output
    assert job.message() is None and job.failure() is None
    doc = job.status()
    assert (doc["status"], doc["exit_code"], doc["message"]) == ("NoIssuesFound", 0, "")
    assert doc["steps_evaluated"] == ALL_STEPS and doc["last_step"] == ALL_STEPS - 1


def test_builtin_rule_from_processing_job_config(tmp_path, s3_endpoint, s3, trial) -> None:
    """Only processingjobconfig.json (no RuleParameter env vars), trial as a ProcessingInput."""
    sdk = sdk_debugger(required=False)
    if sdk is not None:
        config = sdk.Rule.sagemaker(sdk.rule_configs.vanishing_gradient(),
                                    rule_parameters={"threshold": "0.5"}
                                    ).to_debugger_rule_config_dict()
    else:
        config = {"RuleConfigurationName": "VanishingGradient",
                  "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "0.5"}}
    # actions in the escaped form smdebug-rulesconfig produces; stopsignal needs no AWS
    config["RuleParameters"]["action_json"] = '[{\\"name\\": \\"StopSignal\\"}]'
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=trial, as_job_config=True)
    proc = job.run()
    assert proc.returncode == 1, job.output
    assert job.message() == _issues_message("VanishingGradient", 0)
    assert job.status()["rule_configuration_name"] == "VanishingGradient"
    bucket, _, prefix = trial[len("s3://"):].partition("/")
    signal_doc = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/smdebug_rule_stop_signal.json")
                            ["Body"].read())
    assert signal_doc["rule"] == "VanishingGradient"


def test_package_source_and_cli_override(tmp_path, s3_endpoint, s3, s3_bucket, trial) -> None:
    buf = tmp_path / "rules.tar.gz"
    pkg = tmp_path / "src" / "myrules"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gradients.py").write_text(GRADIENT_RULE)
    with tarfile.open(buf, "w:gz") as tf:
        tf.add(pkg, arcname="myrules")
    source = upload_text(s3, s3_bucket, "rules/pkg/rules.tar.gz", buf.read_bytes())
    config = custom_rule_config("FromPackage", source, "GradientMagnitude", {"threshold": "1e9"})
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=trial)
    proc = job.run("--param", "threshold=0.000001", "--end-step", "3")  # CLI beats env
    assert proc.returncode == 1, job.output
    assert job.status()["step"] == 0


# --- errors --------------------------------------------------------------------------------

SYNTAX_ERROR_RULE = "from smdebug.rules.rule import Rule\n\nclass GradientMagnitude(Rule:\n    pass\n"


@pytest.mark.parametrize("case", ["source_missing", "syntax_error", "class_not_found",
                                  "bad_parameter", "missing_parameter", "trial_unreachable",
                                  "no_data_saved", "rule_raises"])
def test_error_causes(case, tmp_path, s3_endpoint, s3, s3_bucket, trial, rule_source) -> None:
    source, rule_to_invoke, params, base = rule_source, "GradientMagnitude", {}, trial
    if case == "source_missing":
        source = f"s3://{s3_bucket}/rules/nowhere/missing_rule.py"
        expected = rf"ClientError: rule source {re.escape(source)} does not exist"
    elif case == "syntax_error":
        source = upload_text(s3, s3_bucket, "rules/bad/bad_rule.py", SYNTAX_ERROR_RULE)
        expected = r"ClientError: cannot import rule source bad_rule\.py: SyntaxError"
    elif case == "class_not_found":
        rule_to_invoke = "NoSuchRule"
        expected = (r"ClientError: class NoSuchRule not found in s3://\S+gradient_rule\.py "
                    r"\(classes defined there: GradientMagnitude\)")
    elif case == "bad_parameter":
        params = {"threshold": "not-a-number"}
        expected = (r"ClientError: cannot create rule GradientMagnitude with parameters "
                    r"\(threshold='not-a-number'\): ValueError: could not convert")
    elif case == "missing_parameter":
        source = upload_text(s3, s3_bucket, "rules/req/req_rule.py", GRADIENT_RULE.replace(
            "threshold=10.0", "threshold"))
        expected = r"ClientError: rule GradientMagnitude requires parameter 'threshold'"
    elif case == "rule_raises":
        source = upload_text(s3, s3_bucket, "rules/raises/raising_rule.py", GRADIENT_RULE.replace(
            "    def invoke_at_step(self, step):\n",
            "    def invoke_at_step(self, step):\n        assert step < 3, 'broken at step 3'\n"))
        expected = (r"ClientError: rule GradientMagnitude raised AssertionError "
                    r"\(last step evaluated: 2\): broken at step 3")
    elif case == "trial_unreachable":
        base = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/my-job/debug-output"
        expected = rf"ClientError: cannot open base trial {re.escape(base)}: \w+"
    else:  # a training job that ended without saving anything
        base = upload_trial(s3, s3_bucket, "empty-job/debug-output", None, collections=False)
        expected = r"ClientError: No debugging data was saved by the training job"
    config = custom_rule_config(f"Case-{case}", source, rule_to_invoke, params or None)
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=base)
    proc = job.run()
    assert proc.returncode == 2, job.output
    message = job.message()
    assert message is not None and re.match(expected, message), message
    assert "\nTraceback (most recent call last):" in message
    assert len(message.encode("utf-8")) <= 1024
    assert job.failure() == message
    doc = job.status()
    assert (doc["status"], doc["exit_code"], doc["message"]) == ("Error", 2, message)
    assert doc["error_type"]


def test_missing_rule_to_invoke(tmp_path, s3_endpoint, trial) -> None:
    config = {"RuleConfigurationName": "NoRule", "RuleParameters": {}}
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=trial)
    proc = job.run()
    assert proc.returncode == 2, job.output
    assert job.message().startswith("ClientError: rule_to_invoke is not set")


# --- a trial still being written, and stopping ---------------------------------------------


def test_follows_a_trial_until_training_ends(tmp_path, s3_endpoint, s3, s3_bucket,
                                             rule_source) -> None:
    prefix = "live-job/debug-output"
    base = upload_trial(s3, s3_bucket, prefix, range(10), end=False)
    config = custom_rule_config("Live", rule_source, "GradientMagnitude", {"threshold": "1e9"})
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=base,
                  extra_env={"SM_RULE_WAIT_LOG_S": "0.5"})
    proc = job.start()
    try:
        doc = job.wait_for_status(lambda d: d["last_step"] == 9)
        assert doc["status"] == "InProgress"
        time.sleep(1.0)
        assert proc.poll() is None, "the job ended although training has not"
        wait_until(lambda: "Waiting for data: no new step" in job.log_file.read_text(),
                   what="the job saying it waits (before the rest of the steps come)")
        upload_trial(s3, s3_bucket, prefix, range(10, ALL_STEPS), collections=False, end=True)
        rc = job.wait(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0, job.output
    assert "Waiting for data: no new step" in job.output
    doc = job.status()
    assert doc["status"] == "NoIssuesFound"
    assert doc["steps_evaluated"] == ALL_STEPS and doc["last_step"] == ALL_STEPS - 1


def test_sigterm_stops_promptly(tmp_path, s3_endpoint, s3, s3_bucket, rule_source) -> None:
    base = upload_trial(s3, s3_bucket, "stopped-job/debug-output", range(5), end=False)
    config = custom_rule_config("ToStop", rule_source, "GradientMagnitude", {"threshold": "1e9"})
    job = RuleJob(tmp_path, s3_endpoint.env, config, base_trial=base,
                  extra_env={"SMDEBUG_TRIAL_TIMEOUT": "300"})
    proc = job.start()
    try:
        job.wait_for_status(lambda d: d["last_step"] == 4)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = job.wait(proc, timeout=60)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 128 + signal.SIGTERM, job.output
    assert elapsed < 30  # (not the trial timeout of 300 s; a loaded machine is slow)
    doc = job.status()
    assert (doc["status"], doc["exit_code"]) == ("Stopped", 143)
    assert doc["steps_evaluated"] == 5
    assert job.failure() is None
    assert job.message().startswith("Stopped:")
    assert "Received signal 15" in job.output


def test_unwritable_output_folder_is_an_error_not_issues_found(tmp_path) -> None:
    """A status folder that cannot be created (in a container: a mount its user may not write
    to) ends the job as Error (exit 2) with a message naming the folder, not with a traceback
    whose exit code 1 would read as IssuesFound."""
    job = OptMlJob(tmp_path, "VanishingGradient")
    (job.opt_ml / "processing").write_text("not a folder")
    proc = subprocess.run(
        [sys.executable, "-m", "smdebug_lite.rule_runner", "--opt-ml", str(job.opt_ml),
         "--rule", "VanishingGradient", "--base-trial", str(TRIAL_SRC)],
        env=job.base_env(tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    message = job.message()
    assert message and message.startswith("ClientError: cannot write the job's output files")
    assert str(job.opt_ml / "processing" / "output" / "rule") in message
