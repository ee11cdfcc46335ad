"""``smdebug.rules.action.action``: where smdebug defined ``Actions``."""

from smdebug_lite.rules.actions import ALLOWED_ACTIONS, Actions

__all__ = ["ALLOWED_ACTIONS", "Actions"]
