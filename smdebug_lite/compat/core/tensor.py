"""``smdebug.core.tensor``: the trial's tensor class and the answer of ``has_passed_step``.

Both are smdebug-lite's own (``smdebug_lite.trials.tensor``), re-exported so that ``isinstance``
checks and ``StepState`` comparisons in code written for smdebug keep matching.
"""

from smdebug_lite.trials.tensor import StepState, Tensor

__all__ = ["StepState", "Tensor"]
