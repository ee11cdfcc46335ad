"""Values for SageMaker Metrics, on a training job.

SageMaker reads JSON lines from ``$SAGEMAKER_METRICS_DIRECTORY/<pid>.json``, one object per
value with the keys ``MetricName``, ``Value``, ``Timestamp`` (whole seconds) and
``IterationNumber``. As in smdebug, the tensors saved in the ``losses``, ``metrics`` and
``sm_metrics`` collections and ``save_scalar(..., sm_metric=True)`` values are sent, named
``<tensor name>_<MODE>`` (``scalar/<name>_<MODE>`` for a scalar) and numbered with the mode's
step. Off SageMaker (no ``TRAINING_JOB_NAME``) or without the directory nothing is written. A
failed write is reported once and metrics stop; tensors are still saved.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from smdebug_lite.log.logger import get_logger
from smdebug_lite.writer.protocol import on_sagemaker

logger = get_logger(__name__)

METRICS_DIR_ENV = "SAGEMAKER_METRICS_DIRECTORY"


class SageMakerMetrics:
    """Appends metric lines to this process's metrics file, opened on first use."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}.json")
        self._file = None
        self._failed = False
        self._skipped: set[str] = set()

    @classmethod
    def for_this_job(cls) -> SageMakerMetrics | None:
        directory = os.environ.get(METRICS_DIR_ENV)
        if not directory or not on_sagemaker():
            return None
        return cls(directory)

    def log(self, name: str, value: Any, timestamp: float, iteration: int) -> None:
        """Send the mean of `value` (a scalar's value; smdebug sent the mean of a saved loss or
        metric tensor). One that is not a finite number is skipped: it is still saved with the
        tensors."""
        if self._failed:
            return
        try:
            number = float(np.mean(np.asarray(value), dtype=np.float64))
        except (TypeError, ValueError):
            if name not in self._skipped:
                self._skipped.add(name)
                logger.warning("metric %s: %r is not a number; it is saved but not sent to "
                               "SageMaker Metrics", name, value)
            return
        if not math.isfinite(number):
            return  # SageMaker Metrics takes finite numbers only
        line = json.dumps({"MetricName": name, "Value": number, "Timestamp": int(timestamp),
                           "IterationNumber": int(iteration)})
        try:
            if self._file is None:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
            # One whole line per write, flushed: the platform reads the file while it grows.
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as e:
            self._failed = True
            logger.error("smdebug-lite cannot write SageMaker metrics to %s (%s); values are "
                         "still saved with the tensors, but no longer sent as metrics", self.path, e)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
