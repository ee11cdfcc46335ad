"""The rule-evaluator program run as a plain SageMaker Processing job (no Debugger fields): the
trial as a ProcessingInput, the rule in the job's environment, one ProcessingOutput for the status
file. Each job is `python -m smdebug_lite.rule_runner` (the image's entrypoint) as a real
subprocess that sees a private /opt/ml laid out as Processing lays it out; the request shapes
come from the SageMaker SDK (sagemaker-core), serialized as CreateProcessingJob receives them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lazy_module import lazy, require_module
from rule_runner_job import ROOT, OptMlJob, private_opt_ml_problem, with_private_opt_ml

pytestmark = pytest.mark.container

require_module("sagemaker")
shapes = lazy("sagemaker.core.shapes")
sdk_utils = lazy("sagemaker.core.utils.utils")

TRIAL_SRC = ROOT / "tests" / "data" / "golden" / "pt_basic"  # steps 0..24, gradients every step
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/smdebug-lite-rule-evaluator:1.0"


@pytest.fixture(scope="module", autouse=True)
def _private_opt_ml(tmp_path_factory: pytest.TempPathFactory) -> None:
    problem = private_opt_ml_problem(tmp_path_factory.mktemp("probe"))
    if problem:
        pytest.skip(problem)


def upload_trial(s3, bucket: str, prefix: str) -> str:
    for p in sorted(TRIAL_SRC.rglob("*")):
        if p.is_file():
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(TRIAL_SRC).as_posix()}",
                          Body=p.read_bytes())
    s3.put_object(Bucket=bucket, Key=f"{prefix}/training_job_end.ts", Body=b"")
    return f"s3://{bucket}/{prefix}"


def processing_request(name: str, trial_uri: str, trial_path: str, input_name: str,
                       environment: dict[str, str], status_path: str) -> dict:
    """CreateProcessingJob's request, the inputs and outputs built with the SDK's shapes."""
    trial_input = shapes.ProcessingInput(
        input_name=input_name,
        s3_input=shapes.ProcessingS3Input(s3_uri=trial_uri, local_path=trial_path,
                                          s3_data_type="S3Prefix", s3_input_mode="File"))
    outputs = shapes.ProcessingOutputConfig(outputs=[shapes.ProcessingOutput(
        output_name="rule-status",
        s3_output=shapes.ProcessingS3Output(s3_uri=f"s3://results/{name}", local_path=status_path,
                                            s3_upload_mode="EndOfJob"))])
    return {
        "ProcessingJobName": name,
        "ProcessingInputs": [sdk_utils.serialize(trial_input)],
        "ProcessingOutputConfig": sdk_utils.serialize(outputs),
        "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1,
                                                  "InstanceType": "ml.m5.large",
                                                  "VolumeSizeInGB": 10}},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "AppSpecification": {"ImageUri": IMAGE},
        "Environment": environment,
        "RoleArn": "arn:aws:iam::123456789012:role/processing",
    }


class ProcessingJob(OptMlJob):
    """What Processing sets up before it starts the container: the request as
    /opt/ml/config/processingjobconfig.json, each input downloaded to its LocalPath, and the
    Environment as environment variables."""

    def __init__(self, tmp_path: Path, request: dict, s3_env: dict[str, str]) -> None:
        super().__init__(tmp_path, request["Environment"]["RULE_CONFIGURATION_NAME"])
        (self.opt_ml / "config").mkdir()
        (self.opt_ml / "config" / "processingjobconfig.json").write_text(json.dumps(request))
        for item in request["ProcessingInputs"]:
            local = Path(item["S3Input"]["LocalPath"]).relative_to("/opt/ml")
            shutil.copytree(TRIAL_SRC, self.opt_ml / local)
            (self.opt_ml / local / "training_job_end.ts").write_text("")
        self.env = {**self.base_env(tmp_path), **s3_env, **request["Environment"],
                    "SMDEBUG_TRIAL_TIMEOUT": "30"}
        self.status_dir = self.opt_ml / Path(
            request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["LocalPath"]
        ).relative_to("/opt/ml")

    def run(self) -> subprocess.CompletedProcess[str]:
        argv = with_private_opt_ml(self.opt_ml, [sys.executable, "-m", "smdebug_lite.rule_runner"])
        proc = subprocess.run(argv, env=self.env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        self.output = proc.stdout + proc.stderr
        return proc

    def status(self) -> dict:
        return json.loads((self.status_dir / f"{self.name}.json").read_text())


def test_trial_as_a_processing_input_and_the_rule_in_the_environment(
        tmp_path, s3_endpoint, s3_bucket) -> None:
    """The documented layout: input `base_trial` at /opt/ml/processing/input/tensors; the runner
    reads the input's S3 prefix (it follows a trial that is still being written)."""
    trial = upload_trial(s3_endpoint.client(), s3_bucket, "my-job/debug-output")
    request = processing_request(
        "vanishing-gradient-my-job", trial, "/opt/ml/processing/input/tensors", "base_trial",
        {"rule_to_invoke": "VanishingGradient", "threshold": "0.5",
         "RULE_CONFIGURATION_NAME": "VanishingGradient"},
        "/opt/ml/processing/output/rule-status")
    job = ProcessingJob(tmp_path, request, s3_endpoint.env)
    shutil.rmtree(job.opt_ml / "processing/input/tensors")  # so only S3 can serve the trial
    proc = job.run()
    assert proc.returncode == 1, job.output
    expected = ("RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 0 "
                "resulted in the condition being met\n")
    assert job.message() == expected  # DescribeProcessingJob's ExitMessage
    doc = job.status()
    assert (doc["status"], doc["step"], doc["exit_code"]) == ("IssuesFound", 0, 1)
    assert doc["base_trial"] == trial
    assert "'threshold': '0.5'" in job.output


def test_downloaded_trial_at_a_path_of_the_jobs_choosing(tmp_path) -> None:
    """A finished trial downloaded to /opt/ml/processing/input/trial, named by `base_trial` in
    the environment; no S3 access at all (the input's URI points at a bucket that does not
    exist)."""
    request = processing_request(
        "vanishing-gradient-done", "s3://no-such-bucket-smdebug-lite/debug-output",
        "/opt/ml/processing/input/trial", "trial",
        {"rule_to_invoke": "VanishingGradient", "threshold": "1e-30",
         "base_trial": "/opt/ml/processing/input/trial",
         "RULE_CONFIGURATION_NAME": "VanishingGradient"},
        "/opt/ml/processing/output/rule-status")
    job = ProcessingJob(tmp_path, request, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    proc = job.run()
    assert proc.returncode == 0, job.output
    assert job.message() is None
    doc = job.status()
    assert (doc["status"], doc["exit_code"]) == ("NoIssuesFound", 0)
    assert doc["steps_evaluated"] == 25
    assert doc["base_trial"] == "/opt/ml/processing/input/trial"
