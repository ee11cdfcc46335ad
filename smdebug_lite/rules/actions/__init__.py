"""Rule actions: StopTraining and Email/SMS (SageMaker's built-in actions) and a local stop signal."""

from smdebug_lite.rules.actions.actions import ALLOWED_ACTIONS, Actions, parse_action_json
from smdebug_lite.rules.actions.message import MessageAction
from smdebug_lite.rules.actions.stop_signal import (
    STOP_SIGNAL_FILE,
    StopSignalAction,
    StopSignalPoller,
    clear_stop_signal,
    read_stop_signal,
    stop_requested,
    write_stop_signal,
)
from smdebug_lite.rules.actions.stop_training import StopTrainingAction

__all__ = [
    "ALLOWED_ACTIONS",
    "Actions",
    "MessageAction",
    "STOP_SIGNAL_FILE",
    "StopSignalAction",
    "StopSignalPoller",
    "StopTrainingAction",
    "clear_stop_signal",
    "parse_action_json",
    "read_stop_signal",
    "stop_requested",
    "write_stop_signal",
]
