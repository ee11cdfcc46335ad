"""Lightning integration: ``from smdebug_lite.lightning import DebuggerCallback``."""

from __future__ import annotations

from smdebug_lite.lightning.callback import DebuggerCallback

__all__ = ["DebuggerCallback"]
