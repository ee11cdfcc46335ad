"""``smdebug.core.utils``: the grab-bag of helpers smdebug's hooks, tests and user scripts used.

Paths and file names follow smdebug_lite's own layout helpers (`smdebug_lite.format.locations`),
so what these helpers name is what the hooks write and the trials read. Nothing here sends
network requests: ``setup_profiler_report`` does nothing (smdebug sent a telemetry GET).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import shutil
import socket
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from smdebug_lite.compat.core.config_constants import (
    CLAIM_FILENAME,
    CONFIG_FILE_PATH_ENV_STR,
    DEFAULT_SAGEMAKER_OUTDIR,
    DEFAULT_SAGEMAKER_TENSORBOARD_PATH,
    PAPERMILL_EXECUTION_ENV_VAR,
    PROFILER_REPORT_VERSION,
    PROFILER_TELEMETRY_URL,
    TENSORBOARD_CONFIG_FILE_PATH_ENV_STR,
)
from smdebug_lite.compat.core.error_handling_agent import ErrorHandlingAgent
from smdebug_lite.compat.core.logger import get_logger
from smdebug_lite.compat.core.paths import ensure_dir, is_s3
from smdebug_lite.exceptions import (
    IndexReaderException,
    SMDebugNotImplementedError,
    SMDebugRuntimeError,
    SMDebugTypeError,
    SMDebugValueError,
)
from smdebug_lite.format.locations import (
    COLLECTIONS_DIR,
    EVENTS_DIR,
    TENSORBOARD_DIR,
    parse_collections_file_name,
    parse_event_file_name,
    parse_index_file_name,
    serialize_worker,
)
from smdebug_lite.storage import is_s3_path

logger = get_logger()
# The process's agent: ``@error_handling_agent.catch_smdebug_errors()`` guards framework callbacks.
error_handling_agent = ErrorHandlingAgent.get_error_handling_agent()


class FRAMEWORK(Enum):
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"
    MXNET = "mxnet"
    XGBOOST = "xgboost"


# -- values ---------------------------------------------------------------------------------


def make_numpy_array(x: Any) -> np.ndarray:
    """A numpy array from an array, a scalar (shape (1,)), a list/tuple, or a dict (0-d object
    array); anything else is an SMDebugTypeError."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, (tuple, list)):
        return np.asarray(x)
    if isinstance(x, dict):
        return np.array(x)
    raise SMDebugTypeError(f"_make_numpy_array does not support the type {type(x)}")


def validate_custom_tensor_value(tensor_value: Any, make_numpy_fn: Callable[[Any], Any]) -> bool:
    """Whether `make_numpy_fn` can turn the value into an array (it raises TypeError if not)."""
    try:
        make_numpy_fn(tensor_value)
    except TypeError:
        return False
    return True


def size_and_shape(t: Any) -> tuple[int, Any]:
    """(bytes, shape) of an array; strings and bytes count their length."""
    if type(t) in (bytes, str):
        return len(t), [len(t)]
    return t.nbytes, t.shape


# -- strings, lists, dicts --------------------------------------------------------------------


def load_json_as_dict(s: str | dict | None) -> dict | None:
    """A JSON string parsed, a dict as it is, None (or the string "None") as None."""
    if s is None or s == str(None):
        return None
    if isinstance(s, str):
        return json.loads(s)
    if isinstance(s, dict):
        return s
    raise SMDebugValueError(f"load_json_as_dict({s!r}): expected a JSON string or a dict")


def flatten(lis: Iterable[Any]) -> list[Any]:
    """A list nested to any depth, flattened (only lists are descended into)."""
    out: list[Any] = []
    for item in lis:
        if type(item) is list:
            out.extend(flatten(item))
        else:
            out.append(item)
    return out


def split(comma_separated_string: str) -> list[str]:
    """``"foo, bar,b az"`` -> ``["foo", "bar", "b az"]`` (items are stripped, none dropped)."""
    return [x.strip() for x in comma_separated_string.split(",")]


def merge_two_dicts(x: dict, y: dict) -> dict:
    """A new dict of both; y's value wins on a shared key."""
    return {**x, **y}


def match_inc(tname: str, include: Iterable[str]) -> bool:
    """Whether any regex of `include` is found anywhere in `tname` (``re.search``)."""
    return any(re.search(inc, tname) for inc in include)


def index(sorted_list: Sequence[Any], elem: Any) -> int:
    """Position of `elem` in a sorted list by bisection; SMDebugValueError when absent."""
    i = bisect.bisect_left(sorted_list, elem)
    if i != len(sorted_list) and sorted_list[i] == elem:
        return i
    raise SMDebugValueError(f"Could not find {elem} in the list")


def step_in_range(range_steps: Sequence[Any], step: int) -> bool:
    """``range_steps[0] <= step < range_steps[1]``; a None bound is open."""
    begin = range_steps[0] is None or int(step) >= int(range_steps[0])
    end = range_steps[1] is None or int(step) < int(range_steps[1])
    return begin and end


# -- paths and file names ---------------------------------------------------------------------


def get_immediate_subdirectories(a_dir: str) -> list[str]:
    return [n for n in os.listdir(a_dir) if os.path.isdir(os.path.join(a_dir, n))]


def list_files_in_directory(directory: str, file_regex: str | re.Pattern | None = None) -> list[str]:
    """Every file under `directory` (recursively) whose base name matches `file_regex`."""
    found = []
    for root, _dirs, files in os.walk(directory):
        for f in files:
            if file_regex is None or re.match(file_regex, f):
                found.append(os.path.join(root, f))
    return found


def list_collection_files_in_directory(directory: str) -> list[str]:
    return list_files_in_directory(directory, file_regex=re.compile(".*_?collections.json$"))


def get_path_to_collections(directory: str) -> str:
    """The directory holding a trial's collections files, with a trailing separator."""
    return os.path.join(directory, *COLLECTIONS_DIR.split("/"), "")


def get_path_to_events_directory(path: str) -> str:
    return os.path.join(path, EVENTS_DIR, "")


def get_relative_event_file_path(path: str) -> str:
    """The last three parts of an event file path, which must sit under events/ or tensorboard/."""
    parts = Path(path).parts
    if len(parts) < 3 or parts[-3] not in (EVENTS_DIR, TENSORBOARD_DIR):
        raise SMDebugRuntimeError(
            f"Invalid path: {path}, should contain either 'events' or 'tensorboard'"
        )
    return os.path.join(*parts[-3:])


def serialize_tf_device(device: str) -> str:
    """A TF device name made file-safe: ``/`` -> ``_``, ``:`` -> ``-``."""
    return serialize_worker(device)


def deserialize_tf_device(device_name: str) -> str:
    """The inverse of `serialize_tf_device` (applied to the whole string, as smdebug did)."""
    return device_name.replace("_", "/").replace("-", ":")


def get_worker_name_from_collection_file(filename: str) -> str:
    """``.../collections/000000000/worker_0_collections.json`` -> ``worker_0``."""
    worker = parse_collections_file_name(filename)
    if worker is None:
        raise SMDebugValueError(
            f"{filename!r} is not a collections file (.../collections/<n>/<worker>_collections.json)"
        )
    return worker


def parse_worker_name_from_file(filename: str) -> str:
    """The worker of an index or event file path; IndexReaderException for any other file.

    Only the file's own name is looked at: a serialized device name (``_replica-0_...``) is
    turned back into ``/replica:0/...``, whatever the directories are called.
    """
    parsed = parse_index_file_name(filename) or parse_event_file_name(filename)
    if parsed is None:
        raise IndexReaderException(f"Invalid File Found: {filename}")
    return parsed[1]


def remove_file_if_exists(file_path: str) -> None:
    if os.path.exists(file_path):
        os.remove(file_path)


def is_first_process(path: str, is_dir: bool = True) -> bool:
    """Whether this process is the first to claim `path` (creating ``claim.smd`` there, or the
    file itself with ``is_dir=False``, exclusively). Always True on S3, where nothing can be
    claimed atomically."""
    if is_s3_path(path):
        logger.debug("is_first_process: %s is on S3; %s is not created", path, CLAIM_FILENAME)
        return True
    if is_dir:
        ensure_dir(path, is_file=False)
        filename = os.path.join(path, CLAIM_FILENAME)
    else:
        ensure_dir(path)
        filename = path
    try:
        fd = os.open(filename, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.fsync(fd)
    os.close(fd)
    return True


def remove_claim_file(path: str) -> None:
    """Remove the claim `is_first_process` made on a local directory."""
    if is_s3_path(path):
        return
    try:
        os.remove(os.path.join(path, CLAIM_FILENAME))
    except FileNotFoundError:
        pass


def __getattr__(name: str) -> Any:
    # check_dir_exists lives in access_layer.utils (which imports the S3 client): loaded when
    # first asked for.
    if name == "check_dir_exists":
        from smdebug_lite.compat.core.access_layer.utils import check_dir_exists

        return check_dir_exists
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- environment ------------------------------------------------------------------------------


def get_region() -> str | None:
    """``AWS_REGION``, or None when it is unset or blank."""
    region = os.environ.get("AWS_REGION")
    return None if region is None or not region.strip() else region


def get_aws_region_from_processing_job_arn(processing_job_arn: str) -> str:
    return processing_job_arn.split(":")[3]


def _prepare_telemetry_url(processing_job_arn: str) -> str:
    """The URL smdebug's profiler report requested; built for callers, never requested here."""
    base = PROFILER_TELEMETRY_URL.format(
        region=get_aws_region_from_processing_job_arn(processing_job_arn)
    )
    query = urllib.parse.urlencode(
        {"x-artifact-id": PROFILER_REPORT_VERSION, "x-arn": processing_job_arn}, safe=":/+"
    )
    return f"{base}/?{query}"


def setup_profiler_report(processing_job_arn: str, opt_out: bool = False) -> None:
    """Accepted for compatibility; smdebug-lite sends no telemetry, so there is nothing to do."""
    if not opt_out and processing_job_arn and not os.environ.get(PAPERMILL_EXECUTION_ENV_VAR):
        logger.debug("setup_profiler_report: no telemetry is sent by smdebug-lite")


def get_tb_worker() -> str:
    """A name unique to this process, for TensorBoard event files."""
    return f"{os.getpid()}_{socket.gethostname()}"


def check_smmodelparallel_training() -> bool:
    """Whether SageMaker's model-parallel library drives this job (``SM_HPS`` names its
    ``partitions`` or ``pipeline_parallel_degree``)."""
    try:
        hps = json.loads(os.environ.get("SM_HPS") or "{}")
    except ValueError:
        return False
    mp = hps.get("mp_parameters") if isinstance(hps, dict) else None
    return isinstance(mp, dict) and ("partitions" in mp or "pipeline_parallel_degree" in mp)


def check_smdataparallel_env() -> bool:
    """Whether SageMaker's data-parallel library drives this job: enabled in
    ``SM_FRAMEWORK_PARAMS`` and launched by MPI with at least 8 ranks."""
    try:
        params = json.loads(os.environ.get("SM_FRAMEWORK_PARAMS") or "{}")
        size = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or "0")
    except (ValueError, TypeError):
        return False
    return (
        isinstance(params, dict)
        and bool(params.get("sagemaker_distributed_dataparallel_enabled"))
        and size >= 8
    )


def get_distributed_worker() -> int | None:
    """This process's rank under torch.distributed or Horovod; None when neither runs.

    torch is consulted only if the process already imported it: a process group cannot be
    running otherwise, and importing torch here would cost seconds.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    for name in ("horovod.torch", "horovod.tensorflow"):
        hvd = sys.modules.get(name)
        if hvd is None:
            continue
        try:
            if hvd.size():
                return hvd.rank()
        except ValueError:  # Horovod imported but not initialised
            continue
    return None


def get_node_id() -> str:
    """``<rank or pid>-<SageMaker host id>``, else ``<rank or pid>-<hostname>``, with no ``_``."""
    from smdebug_lite.compat.core.json_config import get_node_id_from_resource_config

    rank = get_distributed_worker()
    host = get_node_id_from_resource_config()
    who = rank if rank is not None else os.getpid()
    node_id = f"{who}-{host}" if host else f"{who}_{socket.gethostname()}"
    return node_id.replace("_", "-")


# The oldest torch release smdebug-lite's PyTorch hook supports (smdebug.pytorch.utils names it).
MIN_SUPPORTED_PT_VERSION = (2, 1)


@cache
def is_framework_version_supported(framework_type: FRAMEWORK) -> bool:
    """Whether smdebug-lite supports the installed version of a framework (MXNet: always, as
    smdebug answered, though smdebug-lite has no MXNet hook)."""
    if framework_type == FRAMEWORK.PYTORCH:
        import torch  # the installed release, as smdebug.pytorch.utils checks it

        return version_tuple(torch.__version__) >= MIN_SUPPORTED_PT_VERSION
    if framework_type == FRAMEWORK.TENSORFLOW:
        return _installed_version_at_least("tensorflow", (2, 16))
    if framework_type in (FRAMEWORK.XGBOOST, FRAMEWORK.MXNET):
        return True
    raise SMDebugNotImplementedError(f"No such framework type {framework_type}")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``: the leading numeric release parts."""
    parts = []
    for piece in text.split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() != len(piece):
            break
    return tuple(parts)


def _installed_version_at_least(dist: str, minimum: tuple[int, ...]) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    for name in (dist, f"{dist}-cpu"):
        try:
            return version_tuple(version(name)) >= minimum
        except PackageNotFoundError:
            continue
    return False


# -- test helpers smdebug shipped -------------------------------------------------------------


@dataclass(eq=False)
class SagemakerSimulator:
    """Makes this process look like a SageMaker training job for a ``with`` block.

    Writes the hook JSON (``json_file_contents``) to `json_config_path` and a TensorBoard output
    config naming `tensorboard_dir`, and points ``SMDEBUG_CONFIG_FILE_PATH``,
    ``TENSORBOARD_CONFIG_FILE_PATH`` and ``TRAINING_JOB_NAME`` at them. With `cleanup`, the
    default out_dir is emptied first, and on exit the files are removed and the variables put
    back as they were. Only the files it writes are removed, never their whole directory.
    """

    json_config_path: str = "/tmp/zcc_config.json"
    tensorboard_dir: str = "/tmp/tensorboard"
    training_job_name: str = "sm_job"
    json_file_contents: str = "{}"
    cleanup: bool = True
    out_dir: str = field(default=DEFAULT_SAGEMAKER_OUTDIR, init=False)
    tb_json_config_path: str = field(default=DEFAULT_SAGEMAKER_TENSORBOARD_PATH, init=False)
    _saved_env: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)

    def __enter__(self) -> SagemakerSimulator:
        if self.cleanup:
            shutil.rmtree(self.out_dir, ignore_errors=True)
        for path in (self.json_config_path, self.tb_json_config_path):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                remove_file_if_exists(path)
        env = {
            CONFIG_FILE_PATH_ENV_STR: self.json_config_path,
            TENSORBOARD_CONFIG_FILE_PATH_ENV_STR: self.tb_json_config_path,
            "TRAINING_JOB_NAME": self.training_job_name,
        }
        self._saved_env = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        ensure_dir(self.json_config_path)
        with open(self.json_config_path, "w") as f:
            f.write(self.json_file_contents)
        ensure_dir(self.tb_json_config_path)
        with open(self.tb_json_config_path, "w") as f:
            json.dump({"LocalPath": self.tensorboard_dir}, f)
        return self

    def __exit__(self, *args: object) -> None:
        if not self.cleanup:
            return
        remove_file_if_exists(self.json_config_path)
        remove_file_if_exists(self.tb_json_config_path)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass(eq=False)
class ScriptSimulator:
    """Removes `out_dir` (and `tensorboard_dir`) before and after a ``with`` block."""

    out_dir: str = "/tmp/test"
    tensorboard_dir: str | None = None

    def _clean(self) -> None:
        shutil.rmtree(self.out_dir, ignore_errors=True)
        if self.tensorboard_dir:
            shutil.rmtree(self.tensorboard_dir, ignore_errors=True)

    def __enter__(self) -> ScriptSimulator:
        self._clean()
        return self

    def __exit__(self, *args: object) -> None:
        self._clean()


__all__ = [
    "FRAMEWORK",
    "SagemakerSimulator",
    "ScriptSimulator",
    "check_dir_exists",  # noqa: F822 - served by __getattr__
    "check_smdataparallel_env",
    "check_smmodelparallel_training",
    "deserialize_tf_device",
    "ensure_dir",
    "error_handling_agent",
    "flatten",
    "get_aws_region_from_processing_job_arn",
    "get_distributed_worker",
    "get_immediate_subdirectories",
    "get_logger",
    "get_node_id",
    "get_path_to_collections",
    "get_path_to_events_directory",
    "get_region",
    "get_relative_event_file_path",
    "get_tb_worker",
    "get_worker_name_from_collection_file",
    "index",
    "is_first_process",
    "is_framework_version_supported",
    "is_s3",
    "list_collection_files_in_directory",
    "list_files_in_directory",
    "load_json_as_dict",
    "make_numpy_array",
    "match_inc",
    "merge_two_dicts",
    "parse_worker_name_from_file",
    "remove_claim_file",
    "remove_file_if_exists",
    "serialize_tf_device",
    "setup_profiler_report",
    "size_and_shape",
    "split",
    "step_in_range",
    "validate_custom_tensor_value",
    "version_tuple",
]
