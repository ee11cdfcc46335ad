"""``smdebug.core.config_constants``: smdebug 1.0.34's constant names with their exact values.

Scripts and smdebug's own tests read these (environment variable names, SageMaker file paths,
JSON keys); smdebug_lite's modules use the same values under their own names. Where both exist
the value is taken from smdebug_lite's module, so the two cannot drift apart.
"""

from __future__ import annotations

from smdebug_lite.config.hook_json import (
    CONFIG_FILE_PATH_ENV,
    DEFAULT_CONFIG_PATH,
    DEFAULT_OUT_DIR,
    DEFAULT_TB_CONFIG_PATH,
    TB_CONFIG_FILE_PATH_ENV,
)
from smdebug_lite.format.locations import CLAIM_FILE, DEFAULT_WORKER
from smdebug_lite.hooks.training_state import (
    CHECKPOINT_CONFIG_ENV,
    DEFAULT_CHECKPOINT_CONFIG,
    METADATA_FILE,
)

CLAIM_FILENAME = CLAIM_FILE
CONFIG_FILE_PATH_ENV_STR = CONFIG_FILE_PATH_ENV
DEFAULT_WORKER_NAME = DEFAULT_WORKER
DEFAULT_CONFIG_FILE_PATH = DEFAULT_CONFIG_PATH
EXPORT_TENSORBOARD_KEY = "export_tensorboard"
TENSORBOARD_DIR_KEY = "tensorboard_dir"
CONFIG_REDUCTION_CONFIGS_KEY = "reduction_configs"
CONFIG_SAVE_CONFIGS_KEY = "save_configs"
CONFIG_OUTDIR_KEY = "LocalPath"
CONFIG_HOOK_PARAMS_KEY = "HookParameters"
CONFIG_COLLECTION_CONFIG_KEY = "CollectionConfigurations"
CONFIG_COLLECTION_NAME_KEY = "CollectionName"
CONFIG_COLLECTION_PARAMS_KEY = "CollectionParameters"
CONFIG_DRYRUN_KEY = "dry_run"
CONFIG_RDN_CFG_KEY = "reduction_config"
CONFIG_INCLUDE_REGEX_KEY = "include_regex"
CONFIG_INCLUDE_WORKERS_KEY = "include_workers"
CONFIG_SAVE_ALL_KEY = "save_all"
TENSORBOARD_CONFIG_FILE_PATH_ENV_STR = TB_CONFIG_FILE_PATH_ENV
# The name of the environment variable that holds SageMaker's metrics directory.
DEFAULT_SAGEMAKER_METRICS_PATH = "SAGEMAKER_METRICS_DIRECTORY"
DEFAULT_SAGEMAKER_OUTDIR = DEFAULT_OUT_DIR
DEFAULT_SAGEMAKER_TENSORBOARD_PATH = DEFAULT_TB_CONFIG_PATH
DEFAULT_COLLECTIONS_FILE_NAME = f"{DEFAULT_WORKER}_collections.json"
CHECKPOINT_CONFIG_FILE_PATH_ENV_VAR = CHECKPOINT_CONFIG_ENV
CHECKPOINT_DIR_KEY = "LocalPath"
DEFAULT_CHECKPOINT_CONFIG_FILE = DEFAULT_CHECKPOINT_CONFIG
METADATA_FILENAME = METADATA_FILE
METADATA_FILENAME_S3_UPLOADED = METADATA_FILE + ".sagemaker-uploaded"
LATEST_GLOBAL_STEP_SEEN = "latest-global-step-seen"
LATEST_GLOBAL_STEP_SAVED = "latest-global-step-saved"
LATEST_MODE_STEP = "latest-mode-step"
LOG_DUPLICATION_THRESHOLD = 3
PAPERMILL_EXECUTION_ENV_VAR = "PAPERMILL_EXECUTION"
PROFILER_REPORT_VERSION = "profiler_report_v1"
# A template smdebug's profiler report filled in; smdebug-lite never sends requests to it.
PROFILER_TELEMETRY_URL = "https://sm-profiler-report-{region}.s3.{region}.amazonaws.com"
TRAINING_RUN = "training-run"

INCOMPLETE_STEP_WAIT_WINDOW_KEY = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
INCOMPLETE_STEP_WAIT_WINDOW_DEFAULT = 1000

MISSING_EVENT_FILE_RETRY_LIMIT_KEY = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
MISSING_EVENT_FILE_RETRY_LIMIT = 100

TRAINING_END_DELAY_REFRESH_KEY = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
TRAINING_END_DELAY_REFRESH_DEFAULT = 1

CALLABLE_CACHE_ENV_VAR = "SMDEBUG_KERAS_CALLABLE_CACHE_TYPE"
DEFAULT_CALLABLE_CACHE = "CACHE_PER_MODE"

DEFAULT_RESOURCE_CONFIG_FILE = "/opt/ml/input/config/resourceconfig.json"
DEFAULT_SAVED_COLLECTIONS = ["losses"]
