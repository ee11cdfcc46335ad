"""`create_trial`: a LocalTrial or an S3Trial depending on the path."""

from __future__ import annotations

from typing import Any

from smdebug_lite.exceptions import SMDebugNotImplementedError, SMDebugTypeError, SMDebugValueError
from smdebug_lite.storage import is_s3_path
from smdebug_lite.storage.s3 import S3Storage
from smdebug_lite.trials.local_trial import LocalTrial
from smdebug_lite.trials.s3_trial import S3Trial
from smdebug_lite.trials.trial import Trial, default_trial_name

_COMPAT_KWARGS = {"parallel", "check", "index_mode", "cache"}


def create_trial(
    path: str,
    name: str | None = None,
    range_steps: tuple[int | None, int | None] | None = None,
    *,
    timeout: float | None = None,
    profiler: bool = False,
    output_dir: str | None = None,
    **kwargs: Any,
) -> Trial:
    """Open the trial at a local path or `s3://bucket/prefix`.

    `output_dir` is accepted for smdebug's signature; it only served profiler trials.

    `timeout` bounds every wait for data that has not appeared yet (default: env
    SMDEBUG_TRIAL_TIMEOUT, else 600 s); `TrialDataTimeout` is raised when it runs out.
    """
    if not isinstance(path, str):
        raise SMDebugTypeError(f"path={path!r} must be a str (a local path or s3://bucket/prefix)")
    path = path.strip()
    if not path:
        raise SMDebugValueError("path is empty; expected a local path or s3://bucket/prefix")
    if profiler:
        raise SMDebugNotImplementedError("profiler trials are not supported by smdebug-lite")
    unknown = set(kwargs) - _COMPAT_KWARGS
    if unknown:
        raise TypeError(f"create_trial() got unexpected keyword arguments: {sorted(unknown)}")
    if name is None:
        name = default_trial_name(path)
    if is_s3_path(path):
        try:
            storage = S3Storage(path)  # the one place the URI is parsed
        except ValueError as e:
            raise SMDebugValueError(str(e)) from None
        return S3Trial.on_storage(name, storage, range_steps, timeout=timeout, **kwargs)
    return LocalTrial(name, path, range_steps, timeout=timeout, **kwargs)
