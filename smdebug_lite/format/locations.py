"""Every name inside an out_dir, relative to it, and the parsing of those names back.

Names are smdebug's exactly: `events/<STEP12>/<STEP12>_<worker>.tfevents`,
`index/<STEP//1000 as 9 digits>/<STEP12>_<worker>.json`,
`collections/000000000/<worker>_collections.json`, `training_job_end.ts`. Added here:
`non_finite/<worker>.json`, where a worker first met a NaN or Inf (`format/non_finite.py`);
smdebug 1.0.34 lists only `index/`, `events/` and `collections/`, so it never sees them.
"""

from __future__ import annotations

import os
import re
import socket

EVENTS_DIR = "events"
INDEX_DIR = "index"
COLLECTIONS_DIR = "collections/000000000"
END_OF_JOB_FILE = "training_job_end.ts"
CLAIM_FILE = "claim.smd"
TENSORBOARD_DIR = "tensorboard"
NON_FINITE_DIR = "non_finite"
INDEX_GROUP_SIZE = 1000
DEFAULT_WORKER = "worker_0"

_INDEX_RE = re.compile(r"(?:^|/)(\d+)_(.+)\.(?:json|csv)$")
_EVENT_RE = re.compile(r"(?:^|/)(\d+)_(.+)\.tfevents$")
_COLLECTIONS_RE = re.compile(r"(?:^|/)collections/[^/]+/(.+)_collections\.(?:json|ts)$")
_NON_FINITE_RE = re.compile(rf"(?:^|/){NON_FINITE_DIR}/([^/]+)\.json$")


def check_step(step: int) -> int:
    """Steps name files; a negative one makes names smdebug cannot parse, so it is refused."""
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step={step!r}: expected a non-negative integer")
    return step


def step_dir_name(step: int) -> str:
    return f"{check_step(step):012d}"


def event_file_name(step: int, worker: str) -> str:
    s = step_dir_name(step)
    return f"{EVENTS_DIR}/{s}/{s}_{worker}.tfevents"


def index_group(step: int) -> str:
    return f"{check_step(step) // INDEX_GROUP_SIZE:09d}"


def index_file_name(step: int, worker: str) -> str:
    return f"{INDEX_DIR}/{index_group(step)}/{step_dir_name(step)}_{worker}.json"


def collections_file_name(worker: str) -> str:
    return f"{COLLECTIONS_DIR}/{worker}_collections.json"


def non_finite_file_name(worker: str) -> str:
    return f"{NON_FINITE_DIR}/{serialize_worker(worker)}.json"


def tensorboard_file_name(tb_dir: str, mode_name: str, step: int) -> str:
    return os.path.join(tb_dir, mode_name, f"{step_dir_name(step)}_{os.getpid()}_{socket.gethostname()}.tfevents")


def serialize_worker(worker: str) -> str:
    """TF device names become file-safe the way smdebug does it: '/' -> '_', ':' -> '-'."""
    return worker.replace("/", "_").replace(":", "-")


def deserialize_worker(worker: str) -> str:
    """Undo `serialize_worker` only for serialized device names (they start with '_').

    smdebug looked for '__' anywhere in the full path, so a trial under '/tmp/my__run' turned
    'worker_0' into 'worker/0'. Only the worker part of the file name is inspected here.
    """
    if worker.startswith("_"):
        return worker.replace("_", "/").replace("-", ":")
    return worker


def parse_index_file_name(path: str) -> tuple[int, str] | None:
    """(global step, worker) from an index file path, or None for anything else (e.g. .tmp)."""
    m = _INDEX_RE.search(path)
    if m is None:
        return None
    return int(m.group(1)), deserialize_worker(m.group(2))


def parse_event_file_name(path: str) -> tuple[int, str] | None:
    m = _EVENT_RE.search(path)
    if m is None:
        return None
    return int(m.group(1)), deserialize_worker(m.group(2))


def parse_collections_file_name(path: str) -> str | None:
    m = _COLLECTIONS_RE.search(path)
    return None if m is None else deserialize_worker(m.group(1))


def parse_non_finite_file_name(path: str) -> str | None:
    """The worker of a non-finite record's file, or None for anything else (e.g. .tmp)."""
    m = _NON_FINITE_RE.search(path)
    return None if m is None else deserialize_worker(m.group(1))
