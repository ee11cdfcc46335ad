"""A one-file HTML report of trials: losses, gradient norms, weight and activation statistics,
the first NaN/Inf and rule verdicts (``smdebug-lite report``). Needs the ``report`` extra."""

from __future__ import annotations

from smdebug_lite.report.build import ReportError, write_report
from smdebug_lite.report.plots import MissingDependency

__all__ = ["MissingDependency", "ReportError", "write_report"]
