"""What a hook needs of a writer: the `TrialWriter` protocol, which both writers satisfy.

`open_trial_writer` returns a `ProcessTrialWriter` (steps written by the writer process) where
it can, else a `ThreadTrialWriter`; a hook only ever calls what is declared here.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer.pending_step import PendingStep


def on_sagemaker() -> bool:
    """On a SageMaker training job the platform writes `training_job_end.ts`, so `close()`
    does not by default."""
    return bool(os.environ.get("TRAINING_JOB_NAME"))


@runtime_checkable
class TrialWriter(Protocol):
    """One worker's files under one out_dir (a path or an s3:// URI).

    Steps are written in the order submitted. A write error is kept in `error` and raised as
    `WriteFailed` by the next call; writing then stops.
    """

    out_dir: str
    worker: str
    chief: bool  # the chief worker's writer, which has the index compacted as it writes
    error: BaseException | None

    def new_step(self, step: int, mode: ModeKeys, mode_step: int) -> PendingStep:
        """An empty pending step of this writer's worker."""
        ...

    def submit(self, step: PendingStep, /) -> object:
        """Hand a finished step over; returns once its arrays may be kept (not written).

        The process writer returns the template the step became (which a later
        `PendingStep.repeat` may name), the thread writer None."""
        ...

    def write_collections(self, json_text: str) -> None:
        ...

    def flush(self) -> None:
        """Block until every step submitted so far is written (and uploaded, for S3)."""
        ...

    def close(self, mark_training_end: bool | None = None) -> None:
        """Flush and stop; write `training_job_end.ts` if asked (None: unless on SageMaker)."""
        ...

    @property
    def total_wait_s(self) -> float:
        """Seconds training waited for this writer to catch up."""
        ...
