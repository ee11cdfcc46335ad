"""``smdebug.rules.action.stop_training_action``: where smdebug defined ``StopTrainingAction``."""

from smdebug_lite.rules.actions import StopTrainingAction

__all__ = ["StopTrainingAction"]
