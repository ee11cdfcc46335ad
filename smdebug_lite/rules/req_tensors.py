"""smdebug's module path ``smdebug.rules.req_tensors``."""

from smdebug_lite.rules.required_tensors import RequiredTensors

__all__ = ["RequiredTensors"]
