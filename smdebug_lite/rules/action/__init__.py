"""smdebug's module path ``smdebug.rules.action`` (the actions live in `rules.actions`)."""

from smdebug_lite.rules.actions import (
    ALLOWED_ACTIONS,
    Actions,
    MessageAction,
    StopTrainingAction,
)

__all__ = ["ALLOWED_ACTIONS", "Actions", "MessageAction", "StopTrainingAction"]
