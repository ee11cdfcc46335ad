"""Hugging Face Trainer integration: ``from smdebug_lite.huggingface import DebuggerCallback``."""

from __future__ import annotations

from smdebug_lite.huggingface.callback import DebuggerCallback

__all__ = ["DebuggerCallback"]
