"""``smdebug.core.hook_utils``: how a hook settles its out_dir and TensorBoard directory."""

from __future__ import annotations

import os

from smdebug_lite.compat.core.access_layer.utils import check_dir_exists
from smdebug_lite.compat.core.utils import is_s3
from smdebug_lite.exceptions import SMDebugRuntimeError


def verify_and_get_out_dir(out_dir: str | None) -> str:
    """`out_dir` with ``~`` expanded (local paths); refused when it already holds a finished
    run, since the new run's tensors would be mixed with the old ones."""
    if out_dir is None:
        raise RuntimeError("out_dir is a required argument")
    on_s3, _, _ = is_s3(out_dir)
    if not on_s3:
        out_dir = os.path.expanduser(out_dir)
    if check_dir_exists(out_dir):
        raise SMDebugRuntimeError(
            f"out_dir {out_dir} already holds a finished training run (training_job_end.ts); "
            "choose a directory that does not exist yet"
        )
    return out_dir


def get_tensorboard_dir(
    export_tensorboard: bool, tensorboard_dir: str | None, out_dir: str
) -> str | None:
    """A given tensorboard_dir is used even without export_tensorboard (taken as forgotten);
    export_tensorboard alone means ``<out_dir>/tensorboard``; neither means no TensorBoard."""
    if tensorboard_dir:
        return os.path.expanduser(tensorboard_dir)
    if export_tensorboard:
        return os.path.join(out_dir, "tensorboard")
    return None


__all__ = ["get_tensorboard_dir", "verify_and_get_out_dir"]
