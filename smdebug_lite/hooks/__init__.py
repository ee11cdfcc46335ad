"""Framework-agnostic capture logic shared by the PyTorch, TensorFlow and XGBoost hooks."""

from smdebug_lite.config.reductions import reduction_tensor_name
from smdebug_lite.hooks.core import HookCore, TensorPlan

__all__ = ["HookCore", "TensorPlan", "reduction_tensor_name"]
