"""The body a webhook action POSTs: Slack's incoming-webhook shape by default (``text`` and
``blocks``; Teams' incoming webhooks read the same ``text``), or plain JSON fields.

Every text passes `redact` first: a rule's message or evidence may quote a parameter.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from smdebug_lite.log.redact import redact
from smdebug_lite.rules.actions.rule_event import RuleEvent

FORMATS = ("slack", "json")
# Slack's limits: header text 150 characters, section text 3,000, a field's text 2,000.
_HEADER_MAX, _SECTION_MAX, _FIELD_MAX = 150, 3000, 2000


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec="seconds").replace("+00:00", "Z")


def summary_line(event: RuleEvent) -> str:
    status = "found issues" if event.status == "IssuesFound" else f"ended {event.status}"
    at = f" at step {event.step}" if event.step is not None else ""
    trial = f" in trial {event.trial}" if event.trial else ""
    return redact(f"smdebug-lite: rule {event.rule} {status}{at}{trial}")


def slack_body(event: RuleEvent) -> dict[str, Any]:
    fields = [("Rule", event.rule), ("Status", event.status),
              ("Step", "" if event.step is None else str(event.step)),
              ("Trial", event.trial or "")]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "emoji": False,
                                    "text": _cut(redact(f"{event.rule}: {event.status}"),
                                                 _HEADER_MAX)}},
        {"type": "section", "fields": [
            {"type": "mrkdwn", "text": _cut(redact(f"*{name}*\n{value or '-'}"), _FIELD_MAX)}
            for name, value in fields]},
    ]
    detail = event.evidence or event.message
    if detail:
        label = "Evidence" if event.evidence else "Message"
        blocks.append({"type": "section", "text": {
            "type": "mrkdwn", "text": _cut(redact(f"*{label}*\n{detail.strip()}"), _SECTION_MAX)}})
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"smdebug-lite · {_when(event.time)}"}]})
    text = summary_line(event)
    if event.evidence:
        text += redact(f": {event.evidence.strip()}")
    return {"text": _cut(text, _SECTION_MAX), "blocks": blocks}


def json_body(event: RuleEvent) -> dict[str, Any]:
    return {
        "source": "smdebug-lite", "rule": event.rule, "status": event.status,
        "step": event.step, "trial": redact(event.trial) if event.trial else event.trial,
        "message": redact(event.message), "evidence": redact(event.evidence)
        if event.evidence else None, "time": _when(event.time),
    }


def payload(event: RuleEvent, body_format: str = "slack") -> bytes:
    body = json_body(event) if body_format == "json" else slack_body(event)
    return json.dumps(body, ensure_ascii=False).encode("utf-8")
