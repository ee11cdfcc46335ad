"""Rule actions: StopTraining and Email/SMS (SageMaker's built-in actions), a local stop signal
and a webhook (Slack, Teams or any HTTP endpoint)."""

from smdebug_lite.rules.actions.actions import ALLOWED_ACTIONS, Actions, parse_action_json
from smdebug_lite.rules.actions.message import MessageAction
from smdebug_lite.rules.actions.rule_event import RuleEvent
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
from smdebug_lite.rules.actions.webhook import WebhookAction

__all__ = [
    "ALLOWED_ACTIONS",
    "Actions",
    "MessageAction",
    "RuleEvent",
    "STOP_SIGNAL_FILE",
    "StopSignalAction",
    "StopSignalPoller",
    "StopTrainingAction",
    "WebhookAction",
    "clear_stop_signal",
    "parse_action_json",
    "read_stop_signal",
    "stop_requested",
    "write_stop_signal",
]
