"""``smdebug.rules.action``: smdebug's package of rule actions, an alias of the actions'
one home, `smdebug_lite.rules.actions`. Its submodules are smdebug's module paths too."""

from smdebug_lite.rules.actions import (
    ALLOWED_ACTIONS,
    Actions,
    MessageAction,
    StopTrainingAction,
)

__all__ = ["ALLOWED_ACTIONS", "Actions", "MessageAction", "StopTrainingAction"]
