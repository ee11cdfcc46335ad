"""The actions a rule runs when its condition is met, parsed from ``action_json``: SageMaker's
(StopTraining, Email, SMS) and ours (StopSignal, Webhook).

Accepted forms: a JSON object or list of objects; the same with backslash-escaped quotes
(``[{\\"name\\": \\"stoptraining\\", ...}]``, as smdebug-rulesconfig serializes it); or a JSON
string holding either. Unlike smdebug, the text is not lower-cased: e-mail addresses and job
prefixes keep their case. Action names and keys are matched case-insensitively. A malformed
string or an unusable entry is logged and skipped; it never fails the rule. Entries are logged
with their URLs and header values masked (a webhook's URL is its credential).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from smdebug_lite.log.logger import get_logger
from smdebug_lite.log.redact import MASK, redact_url, redact_value
from smdebug_lite.rules.actions.message import MessageAction
from smdebug_lite.rules.actions.rule_event import RuleEvent
from smdebug_lite.rules.actions.stop_signal import StopSignalAction
from smdebug_lite.rules.actions.stop_training import StopTrainingAction
from smdebug_lite.rules.actions.webhook import WebhookAction

logger = get_logger(__name__)

ALLOWED_ACTIONS = ("stoptraining", "sms", "email", "stopsignal", "webhook")


class Action(Protocol):
    name: str

    def invoke(self, message: str = "") -> None: ...


def shown_entry(entry: Any) -> Any:
    """An action entry as it may be logged: URLs reduced to their host, headers masked."""
    if not isinstance(entry, dict):
        return redact_value("", entry)
    shown: dict[str, Any] = {}
    for key, value in entry.items():
        k = str(key).strip().lower()
        if k == "url":
            shown[key] = redact_url(value)
        elif k == "headers":
            shown[key] = ({h: MASK for h in value} if isinstance(value, dict) else MASK)
        else:
            shown[key] = redact_value(str(key), value)
    return shown


def parse_action_json(text: str | None) -> list[dict[str, Any]]:
    """The list of action dicts in `text` ([] for empty); ValueError if it is not JSON."""
    text = (text or "").strip()
    if not text:
        return []
    doc: Any = None
    candidates = [text]
    if '\\"' in text:
        candidates.append(text.replace('\\"', '"'))
    err: Exception | None = None
    for cand in candidates:
        try:
            doc = json.loads(cand)
            if isinstance(doc, str):  # JSON text wrapped in a JSON string
                doc = json.loads(doc)
        except ValueError as e:
            err = e
            continue
        break
    else:
        # The text may hold a webhook URL: only its length is shown.
        raise ValueError(f"action_json is not valid JSON ({err}); {len(text)} characters")
    if isinstance(doc, dict):
        return [doc]
    if isinstance(doc, list):
        return doc
    raise ValueError(f"action_json must be an object or a list of objects, got {type(doc).__name__}")


class Actions:
    """``Actions(action_str, rule_name)``; ``invoke(message)`` runs each one, logging failures.

    ``actions_str`` is smdebug's keyword for ``action_str``."""

    def __init__(self, action_str: str | None = None, rule_name: str = "",
                 default_stop_signal_dir: str | None = None, *,
                 actions_str: str | None = None) -> None:
        if actions_str is not None:
            if action_str is not None:
                raise TypeError("Actions() takes action_str or actions_str, not both")
            action_str = actions_str
        self.rule_name = rule_name
        self.actions: list[Action] = []
        try:
            entries = parse_action_json(action_str)
        except ValueError as e:
            logger.error("Rule %s: ignoring actions: %s", rule_name, e)
            return
        if not entries:
            logger.debug("No action specified for rule %s", rule_name)
        for entry in entries:
            action = self._build(entry, default_stop_signal_dir)
            if action is not None:
                self.actions.append(action)

    def _build(self, entry: Any, default_dir: str | None) -> Action | None:
        if not isinstance(entry, dict):
            logger.error("Rule %s: skipping action %r: expected an object", self.rule_name,
                         shown_entry(entry))
            return None
        keys = {str(k).strip().lower(): v for k, v in entry.items()}
        name = str(keys.get("name", "")).strip().lower().replace("_", "").replace("-", "")
        try:
            if name == "stoptraining":
                prefix = keys.get("training_job_prefix")
                if not prefix:
                    raise ValueError("needs 'training_job_prefix'")
                return StopTrainingAction(self.rule_name, str(prefix))
            if name in ("sms", "email"):
                endpoint = keys.get("endpoint")
                if not endpoint:
                    raise ValueError("needs 'endpoint'")
                return MessageAction(self.rule_name, name, str(endpoint))
            if name == "stopsignal":
                path = keys.get("path") or keys.get("out_dir") or default_dir
                if not path:
                    raise ValueError("needs 'path' (the training's out_dir)")
                return StopSignalAction(self.rule_name, str(path))
            if name == "webhook":
                return WebhookAction.from_entry(self.rule_name, keys)
            raise ValueError(f"unknown action name; allowed: {', '.join(ALLOWED_ACTIONS)}")
        except ValueError as e:
            logger.error("Rule %s: skipping action %s: %s", self.rule_name, shown_entry(entry), e)
            return None

    def __len__(self) -> int:
        return len(self.actions)

    def __iter__(self):
        return iter(self.actions)

    def invoke(self, message: str = "", event: RuleEvent | None = None) -> None:
        """Run each action with `message`; those that take the whole `event` (webhooks) get
        it (built from the message when not given)."""
        if self.actions:
            logger.info("Rule %s: invoking %d action(s)", self.rule_name, len(self.actions))
        if event is None:
            event = RuleEvent(self.rule_name, message=message)
        for action in self.actions:
            try:
                if getattr(action, "takes_event", False):
                    action.invoke(message, event=event)
                else:
                    action.invoke(message)
            except Exception as e:  # actions log their own AWS errors; this is a last resort
                logger.error("Rule %s: action %s failed: %s", self.rule_name,
                             getattr(action, "name", action), e)
