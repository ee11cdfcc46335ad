"""smdebug's module path ``smdebug.rules.req_tensors``."""

from smdebug_lite.rules.required_tensors import RequiredTensors
from smdebug_lite.rules.required_tensors_for_trial import RequiredTensorsForTrial

__all__ = ["RequiredTensors", "RequiredTensorsForTrial"]
