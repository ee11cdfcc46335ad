"""``smdebug.tensorflow.session``: the TF1 hooks' module. Both names import; building either
raises SMDebugNotImplementedError pointing to ``KerasHook`` (TensorFlow 2.16+ has no sessions or
estimators)."""

from __future__ import annotations

from smdebug_lite.tensorflow.tf1 import EstimatorHook, SessionHook

__all__ = ["EstimatorHook", "SessionHook"]
