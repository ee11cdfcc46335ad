"""``smdebug.rules.action.message_action``: where smdebug defined ``MessageAction``."""

from smdebug_lite.rules.actions import MessageAction

__all__ = ["MessageAction"]
