"""Opening trials for a command: fail fast where the library would wait for data."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smdebug_lite.cli.console import spinner
from smdebug_lite.cli.errors import EXIT_BAD_STEP, EXIT_ERROR, EXIT_NO_TRIAL, fail

DEFAULT_TIMEOUT_S = 10.0
TRIAL_FOLDERS = ("collections", "index")


def check_local_trial(path: str) -> None:
    """A local trial must be a directory with a collections/ or index/ folder: create_trial
    would otherwise wait for a training job to write one."""
    p = Path(path).expanduser()
    if not p.exists():
        fail(f"no trial at {path}: no such file or directory", EXIT_NO_TRIAL)
    if not p.is_dir():
        fail(f"no trial at {path}: not a directory", EXIT_NO_TRIAL)
    if not any((p / d).is_dir() for d in TRIAL_FOLDERS):
        fail(f"no trial at {path}: expected a collections/ or index/ folder written by a hook",
             EXIT_NO_TRIAL)


def open_trial(uri: str, timeout: float = DEFAULT_TIMEOUT_S, quiet: bool = False) -> Any:
    from smdebug_lite.trials import create_trial

    if "://" not in uri:
        check_local_trial(uri)
    with spinner(f"Reading the index of {uri}", quiet):
        return create_trial(uri, timeout=timeout)


def parse_mode_option(mode: str | None) -> Any:
    from smdebug_lite.config.arguments import parse_mode
    from smdebug_lite.modes import ALLOWED_MODE_NAMES

    if mode is None:
        return None
    try:
        return parse_mode(mode)
    except ValueError:
        fail(f"--mode {mode!r} is not a mode; expected one of {', '.join(ALLOWED_MODE_NAMES)}",
             EXIT_ERROR)


def check_collection(trial: Any, name: str) -> None:
    from smdebug_lite.cli.errors import EXIT_UNKNOWN_NAME

    known = sorted(trial.collections())
    if name not in known:
        fail(f"no collection {name!r} in trial {trial.path}; known: {', '.join(known)}",
             EXIT_UNKNOWN_NAME)


def check_tensor(trial: Any, name: str) -> Any:
    from smdebug_lite.cli.errors import EXIT_UNKNOWN_NAME

    if not trial.has_tensor(name):
        names = trial.tensor_names()
        close = [n for n in names if name.lower() in n.lower()][:5]
        hint = f"; similar: {', '.join(close)}" if close else f" ({len(names)} tensors; see ls)"
        fail(f"no tensor {name!r} in trial {trial.path}{hint}", EXIT_UNKNOWN_NAME)
    return trial.tensor(name)


def steps_text(steps: list[int]) -> str:
    if not steps:
        return "none"
    return f"{steps[0]}..{steps[-1]} ({len(steps)} steps)"


def missing_step(trial: Any, tensor: str, step: int, mode: Any, steps: list[int]) -> None:
    mode_name = mode.name if mode is not None else "GLOBAL"
    fail(f"tensor {tensor!r} has nothing saved at step {step} of mode {mode_name} in "
         f"{trial.path}; saved steps: {steps_text(steps)}", EXIT_BAD_STEP)


def disk_size(uri: str) -> int | None:
    """Bytes under the trial (local or S3); None when it cannot be listed."""
    if "://" not in uri:
        total = 0
        for root, _dirs, files in os.walk(uri):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except OSError:
                    pass
        return total
    try:
        from smdebug_lite.storage.s3 import parse_s3_uri, s3_client

        bucket, prefix = parse_s3_uri(uri)
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        total = 0
        for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                            Prefix=prefix):
            total += sum(o["Size"] for o in page.get("Contents", ()))
        return total
    except Exception:
        return None


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
