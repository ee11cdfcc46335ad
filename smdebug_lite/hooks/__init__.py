"""Framework-agnostic capture logic shared by the PyTorch, TensorFlow and XGBoost hooks."""

from smdebug_lite.hooks.core import HookCore, TensorPlan
from smdebug_lite.reductions import reduction_tensor_name

__all__ = ["HookCore", "TensorPlan", "reduction_tensor_name"]
