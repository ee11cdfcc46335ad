"""Action ``{"name": "webhook", "url": "https://...", "headers": {...}}``: POST the rule's event
to an HTTP endpoint (a Slack or Teams incoming webhook as it is, or any service).

Options: ``format`` (``slack``, the default: ``{"text", "blocks"}``; ``json``: the event's
fields), ``timeout`` (seconds per attempt, default 10), ``retries`` (after the first attempt,
default 3). A connection failure, a timeout, HTTP 408, 429 or 5xx is tried again after
0.5 s, 1 s, 2 s ... (at most 8 s, or the server's Retry-After up to that); anything else, a
redirect included, is final. Delivery happens at most once per action: a rule job builds its
actions once, so each webhook fires once per rule per job, whatever the rule does after.

The URL's path and query, and the header values, are treated as secrets: they are registered
with `smdebug_lite.log.redact` when the action is built, and the URL is shown as
``https://host/***`` in every log line and error. Failures are logged, never raised: a
notification must not fail the rule. Only the standard library is used (urllib).
"""

from __future__ import annotations

import http.client
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from smdebug_lite.log.logger import get_logger
from smdebug_lite.log.redact import redact, redact_url, register_secret, register_url
from smdebug_lite.rules.actions.rule_event import RuleEvent
from smdebug_lite.rules.actions.webhook_payload import FORMATS, payload

logger = get_logger(__name__)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 3
MAX_RETRIES = 10
MAX_TIMEOUT_S = 120.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
_RETRIED_STATUSES = frozenset({408, 429})
# Header values that are never credentials, so they need not be scrubbed from every message.
_PLAIN_HEADERS = frozenset({"content-type", "accept", "user-agent"})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib turns a redirected POST into a GET without its body; a redirect fails instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(_NoRedirect())


def _number(entry: Mapping[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = entry.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}={value!r}: expected a number") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"{key}={value!r}: expected a number from {low:g} to {high:g}")
    return number


def backoff_s(attempt: int, retry_after: str | None = None) -> float:
    """Seconds before retry number `attempt` (1, 2, ...): doubling from 0.5 s, at most 8 s; a
    numeric Retry-After (seconds) is honoured up to the same bound."""
    if retry_after is not None:
        try:
            return min(MAX_BACKOFF_S, max(0.0, float(retry_after)))
        except ValueError:
            pass
    return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (attempt - 1))


class WebhookAction:
    name = "webhook"
    takes_event = True  # `Actions.invoke` hands it the whole RuleEvent

    def __init__(self, rule_name: str, url: str, headers: Mapping[str, Any] | None = None, *,
                 body_format: str = "slack", timeout_s: float = DEFAULT_TIMEOUT_S,
                 retries: int = DEFAULT_RETRIES,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        from urllib.parse import urlsplit

        if not isinstance(url, str) or not url.strip():
            raise ValueError("needs 'url' (the webhook's http:// or https:// address)")
        url = url.strip()
        register_url(url)  # before any message below can quote it
        shown = redact_url(url)
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise ValueError(f"url {shown} is not a valid URL") from None
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url {shown} must be an http:// or https:// URL with a host")
        if headers is not None and not isinstance(headers, Mapping):
            raise ValueError("'headers' must be an object of header names and values")
        self.headers = {"Content-Type": "application/json",
                        "User-Agent": f"smdebug-lite/{_version()}"}
        for key, value in (headers or {}).items():
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError(f"header {str(key)!r} must have a string value")
            text = str(value)
            if str(key).strip().lower() not in _PLAIN_HEADERS:
                register_secret(text)
            self.headers[str(key).strip()] = text
        body_format = str(body_format).strip().lower()
        if body_format not in FORMATS:
            raise ValueError(f"format={body_format!r}: expected one of {', '.join(FORMATS)}")
        self.rule_name = rule_name
        self.url = url
        self.shown_url = shown
        self.body_format = body_format
        self.timeout_s = timeout_s
        self.retries = retries
        self._sleep = sleep
        self.fired = False
        self.delivered = False
        self.attempts = 0
        self.last_status: int | None = None
        self.error: str | None = None  # why delivery failed, redacted

    @classmethod
    def from_entry(cls, rule_name: str, entry: Mapping[str, Any]) -> WebhookAction:
        """From an action_json entry (keys already lower-cased)."""
        return cls(rule_name, entry.get("url", ""), entry.get("headers"),
                   body_format=str(entry.get("format", "slack")),
                   timeout_s=_number(entry, "timeout", DEFAULT_TIMEOUT_S, 0.001, MAX_TIMEOUT_S),
                   retries=int(_number(entry, "retries", DEFAULT_RETRIES, 0, MAX_RETRIES)))

    def invoke(self, message: str = "", event: RuleEvent | None = None) -> None:
        if self.fired:
            logger.debug("Rule %s: webhook %s already notified for this job", self.rule_name,
                          self.shown_url)
            return
        self.fired = True
        if event is None:
            event = RuleEvent(self.rule_name, message=message)
        self._deliver(payload(event, self.body_format))

    def _deliver(self, body: bytes) -> None:
        opener = _opener()
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            self.attempts = attempt
            request = urllib.request.Request(self.url, data=body, headers=self.headers,
                                             method="POST")
            retry_after: str | None = None
            try:
                with opener.open(request, timeout=self.timeout_s) as response:
                    self.last_status = response.status
                    response.read(64 * 1024)
                self.delivered = True
                self.error = None
                logger.info("Rule %s: webhook %s notified (HTTP %d)", self.rule_name,
                            self.shown_url, self.last_status)
                return
            except urllib.error.HTTPError as e:
                self.last_status = e.code
                retry = e.code in _RETRIED_STATUSES or 500 <= e.code < 600
                retry_after = e.headers.get("Retry-After") if e.headers else None
                self.error = f"HTTP {e.code} {redact(e.reason)}"
                e.close()
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                reason = getattr(e, "reason", e)
                self.error = redact(f"{type(e).__name__}: {reason}")
                retry = True
            if not retry or attempt == attempts:
                break
            wait = backoff_s(attempt, retry_after)
            logger.warning("Rule %s: webhook %s attempt %d of %d failed (%s); retrying in %.1fs",
                           self.rule_name, self.shown_url, attempt, attempts, self.error, wait)
            self._sleep(wait)
        logger.error("Rule %s: webhook %s not notified after %d attempt(s): %s",
                     self.rule_name, self.shown_url, self.attempts, self.error)


def _version() -> str:
    from smdebug_lite._version import __version__

    return str(__version__)
