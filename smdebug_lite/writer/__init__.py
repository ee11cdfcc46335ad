"""Writing trials: one event file and one index file per saved (step, worker).

A hook calls `open_trial_writer` and uses what the `TrialWriter` protocol declares: steps are
gathered in a `PendingStep` and written by a `StepFileWriter`, in a separate writer process
(`ProcessTrialWriter`, see `writer.process`) or on a thread of the training process
(`ThreadTrialWriter`, the fallback).
"""

from smdebug_lite.writer.choice import open_trial_writer
from smdebug_lite.writer.pending_step import PendingStep
from smdebug_lite.writer.process.trial_writer import ProcessTrialWriter
from smdebug_lite.writer.protocol import TrialWriter, on_sagemaker
from smdebug_lite.writer.step_file_writer import StepFileWriter
from smdebug_lite.writer.thread_writer import ThreadTrialWriter
from smdebug_lite.writer.write_failed import WriteFailed

__all__ = [
    "PendingStep",
    "ProcessTrialWriter",
    "StepFileWriter",
    "ThreadTrialWriter",
    "TrialWriter",
    "WriteFailed",
    "on_sagemaker",
    "open_trial_writer",
]
