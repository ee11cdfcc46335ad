"""Action ``{"name": "StopTraining", "training_job_prefix": ...}``: stop a SageMaker training job.

The job is looked up when the rule fires (not when the rule starts, when the job may not be
listed yet): InProgress jobs whose name starts with the prefix. It is stopped only if exactly
one matches, since stopping the wrong job is worse than stopping none. AWS errors are logged.
"""

from __future__ import annotations

from typing import Any

from smdebug_lite.log.logger import get_logger
from smdebug_lite.rules.actions._aws import action_region, aws_client

logger = get_logger(__name__)

MAX_PAGES = 50


class StopTrainingAction:
    name = "stoptraining"

    def __init__(self, rule_name: str, training_job_prefix: str) -> None:
        self.rule_name = rule_name
        self.training_job_prefix = training_job_prefix
        self.found_jobs: list[str] = []
        self.stopped_job: str | None = None
        self.error: BaseException | None = None
        logger.info("StopTraining action for rule %s: job prefix %r, region %s",
                    rule_name, training_job_prefix, action_region())

    def _matching_jobs(self, client: Any) -> list[str]:
        found: list[str] = []
        token = None
        for _ in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"NameContains": self.training_job_prefix,
                                      "StatusEquals": "InProgress", "SortBy": "CreationTime",
                                      "SortOrder": "Descending"}
            if token:
                kwargs["NextToken"] = token
            res = client.list_training_jobs(**kwargs)
            for job in res.get("TrainingJobSummaries", []):
                name = job.get("TrainingJobName") or ""
                if name.startswith(self.training_job_prefix) and name not in found:
                    found.append(name)
            token = res.get("NextToken")
            if not token:
                break
        return found

    def invoke(self, message: str = "") -> None:
        try:
            client = aws_client("sagemaker")
            self.found_jobs = self._matching_jobs(client)
            if len(self.found_jobs) != 1:
                logger.warning(
                    "Rule %s: not stopping any job, %d InProgress jobs match prefix %r: %s",
                    self.rule_name, len(self.found_jobs), self.training_job_prefix,
                    self.found_jobs)
                return
            job = self.found_jobs[0]
            logger.info("Rule %s: stopping training job %s (%s)", self.rule_name, job, message)
            self.stopped_job = job
            client.stop_training_job(TrainingJobName=job)
        except Exception as e:
            self.error = e
            logger.error("Rule %s: StopTraining action failed: %s", self.rule_name, e)
