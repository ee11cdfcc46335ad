"""Writing trials: one event file and one index file per saved (step, worker)."""

from smdebug_lite.writer.step_writer import StepWriter
from smdebug_lite.writer.trial_writer import TrialWriter

__all__ = ["StepWriter", "TrialWriter"]
