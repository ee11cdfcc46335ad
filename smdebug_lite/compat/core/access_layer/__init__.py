"""``smdebug.core.access_layer``: reading and writing trial files locally and on S3."""

from .file import TSAccessFile
from .s3 import TSAccessS3
from .utils import (
    DEFAULT_GRACETIME_FOR_RULE_STOP_SEC,
    ENV_RULE_STOP_SIGNAL_FILENAME,
    check_dir_exists,
    delete_s3_prefixes,
    has_training_ended,
    is_rule_signalled_gracetime_passed,
    training_has_ended,
)

__all__ = [
    "DEFAULT_GRACETIME_FOR_RULE_STOP_SEC",
    "ENV_RULE_STOP_SIGNAL_FILENAME",
    "TSAccessFile",
    "TSAccessS3",
    "check_dir_exists",
    "delete_s3_prefixes",
    "has_training_ended",
    "is_rule_signalled_gracetime_passed",
    "training_has_ended",
]
