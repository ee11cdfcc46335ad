"""``smdebug.core.access_layer.utils``: the end-of-training marker and a few S3 helpers.

``training_job_end.ts`` in a trial directory tells readers that no more steps will come.
Paths are local directories or ``s3://bucket/prefix``.
"""

from __future__ import annotations

import os
import time

from smdebug_lite.compat.core.paths import is_s3
from smdebug_lite.format.locations import END_OF_JOB_FILE
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import LocalStorage

from .file import TSAccessFile
from .s3 import TSAccessS3
from .s3handler import DeleteRequest, ListRequest, ReadObjectRequest, S3Handler

END_OF_JOB_FILENAME = END_OF_JOB_FILE
ENV_RULE_STOP_SIGNAL_FILENAME = "SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE"
DEFAULT_GRACETIME_FOR_RULE_STOP_SEC = 60
RULE_JOB_STOP_SIGNAL_FILENAME = os.getenv(ENV_RULE_STOP_SIGNAL_FILENAME, default=None)
RULESTOP_GRACETIME_SECONDS = os.getenv(
    "rule_stop_grace_time_secs", default=DEFAULT_GRACETIME_FOR_RULE_STOP_SEC
)
_SAGEMAKER_JOB_ENV = "TRAINING_JOB_NAME"

logger = get_logger(__name__)

__all__ = [
    "DEFAULT_GRACETIME_FOR_RULE_STOP_SEC",
    "END_OF_JOB_FILENAME",
    "ENV_RULE_STOP_SIGNAL_FILENAME",
    "TSAccessFile",
    "TSAccessS3",
    "check_dir_exists",
    "delete_s3_prefixes",
    "file_exists",
    "has_training_ended",
    "is_rule_signalled_gracetime_passed",
    "is_s3",
    "training_has_ended",
]


def training_has_ended(trial_prefix: str) -> None:
    """Write the end marker into `trial_prefix` (created if needed).

    Not on a SageMaker training job (``TRAINING_JOB_NAME`` set): there the platform uploads the
    output once the job ends, and the marker must not reach it before the last step does."""
    if _SAGEMAKER_JOB_ENV in os.environ:
        logger.debug("Not writing %s on a SageMaker training job", END_OF_JOB_FILENAME)
        return
    on_s3, bucket, key = is_s3(trial_prefix)
    if on_s3:
        writer = TSAccessS3(str(bucket), os.path.join(str(key), END_OF_JOB_FILENAME), binary=False)
        writer.close()
    else:
        # A unique temporary name: several workers of one job may mark the end at once.
        LocalStorage(trial_prefix).write_atomic(END_OF_JOB_FILENAME, b"")


def file_exists(file_path: str) -> bool:
    """Whether a local file exists, or an S3 object with that key (or key prefix)."""
    on_s3, bucket, key = is_s3(file_path)
    if on_s3:
        return len(S3Handler.list_prefix(ListRequest(str(bucket), str(key)))) > 0
    return os.path.exists(file_path)


def has_training_ended(trial_prefix: str) -> bool:
    return file_exists(os.path.join(trial_prefix, END_OF_JOB_FILENAME))


def _read_text(path: str) -> str:
    on_s3, _, _ = is_s3(path)
    if on_s3:
        data = S3Handler.get_object(ReadObjectRequest(path))
        if data is None:
            raise FileNotFoundError(path)
        return data.decode("utf-8")
    with open(path) as f:
        return f.read()


def is_rule_signalled_gracetime_passed(trial_prefix: str) -> bool:
    """True once the rule-stop signal file (named by $SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE, in
    `trial_prefix`) holds a time more than the grace period ($rule_stop_grace_time_secs, 60 s)
    ago. An unreadable signal file counts as passed: the rule is being stopped either way."""
    name = os.getenv(ENV_RULE_STOP_SIGNAL_FILENAME)
    if name is None:
        return False
    file_path = os.path.join(trial_prefix, name)
    if not file_exists(file_path):
        return False
    try:
        signalled_at = int(_read_text(file_path).strip())
        grace = float(os.getenv("rule_stop_grace_time_secs", DEFAULT_GRACETIME_FOR_RULE_STOP_SEC))
    except Exception as e:  # noqa: BLE001 - any failure means the stop signal stands
        logger.info(
            "Could not read the rule stop signal file %s (%s); treating it as passed", file_path, e
        )
        return True
    if time.time() > signalled_at + grace:
        logger.info(
            "Rule stop signal %s (time %d): the grace period of %s s has passed",
            file_path,
            signalled_at,
            grace,
        )
        return True
    return False


def delete_s3_prefixes(bucket: str, keys: str | list[str]) -> None:
    """Delete every object under each of `keys` (prefixes) in `bucket`."""
    if not isinstance(keys, list):
        keys = [keys]
    S3Handler.delete_prefixes([DeleteRequest(bucket, key) for key in keys])


def check_dir_exists(path: str) -> bool:
    """Whether `path` (local or S3) holds the end marker, found as has_training_ended finds it."""
    return has_training_ended(path)
