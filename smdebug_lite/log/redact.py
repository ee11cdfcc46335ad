"""Keeping credentials out of logs, status files and error messages.

RuleParameters and environment variables reach log lines, exception texts and the status
files SageMaker shows to anyone who can describe the job. One function, `redact`, scrubs text
before it goes anywhere, three ways:

* **by name**: ``KEY=value``, ``KEY: value`` and dict/JSON ``'KEY': 'value'`` pairs whose key
  looks like a credential (`is_secret_name`) keep the key and lose the value;
* **by value**: values registered at start-up (`register_secrets` with the environment or the
  parameters) are replaced wherever they appear, e.g. inside an exception text that quotes one;
* **URL credentials**: ``scheme://user:password@host`` keeps the user and loses the password.

`RedactingFilter` applies it to log records; `redact_mapping` to dicts of parameters;
`redact_url` to a URL whose path is itself the secret (a webhook's), which `register_url`
also registers, so the URL is scrubbed wherever it is quoted later.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
# Shorter values (and flags such as "true") are not scrubbed by value: replacing "1" or "true"
# everywhere would garble every message, and such values are not credentials anyway.
MIN_SECRET_LENGTH = 4
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "unset", "disabled", "enabled"})

_WORD = r"[A-Za-z0-9_.-]"
_SECRET_PART = r"(?:secret|passw(?:or)?d|api[_-]?key|apikey|credential|private[_-]?key)"
_SECRET_NAME = re.compile(rf"{_SECRET_PART}|(?:^|[_.-])token$", re.IGNORECASE)
# Only credential-named keys match, so a harmless pair never swallows the text after it.
_SECRET_KEY = rf"{_WORD}*{_SECRET_PART}{_WORD}*|(?:{_WORD}*[_.-])?token"
# key=value, key: value, 'key': 'value' (dict repr), "key": 123 (JSON), key='value' (kwargs repr)
_PAIR = re.compile(
    rf"""(?<!{_WORD})(?P<kq>['"]?)(?P<key>{_SECRET_KEY})(?P=kq)(?P<sep>[ \t]*[=:][ \t]*)"""
    r"""(?:(?P<vq>['"])(?P<qvalue>(?:\\.|(?!(?P=vq)).)*)(?P=vq)|(?P<bvalue>[^\s,;&)}\]'"]+))""",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):[^/\s@]+@")

_lock = threading.Lock()
_values: set[str] = set()
_pattern: re.Pattern[str] | None = None


def is_secret_name(name: str) -> bool:
    """Whether a parameter or variable name looks like a credential (case-insensitive):
    ``*secret*``, ``*password*``/``*passwd*``, ``*api_key*``, ``*credential*``,
    ``*private_key*``, or ending in ``_token`` (``AWS_SESSION_TOKEN``, ``api_token``)."""
    return bool(_SECRET_NAME.search(name))


def _variants(value: str) -> set[str]:
    """The value as it may appear in text: plain, in a repr (either quote), in JSON."""
    escaped = value.replace("\\", "\\\\")
    out = {value, repr(value)[1:-1], json.dumps(value)[1:-1],
           escaped.replace("'", "\\'"), escaped.replace('"', '\\"')}
    return {v for v in out if len(v) >= MIN_SECRET_LENGTH}


def register_secret(value: Any) -> None:
    """Scrub `value` from all text `redact` sees from now on."""
    global _pattern
    if value is None:
        return
    text = str(value).strip()
    if len(text) < MIN_SECRET_LENGTH or text.lower() in _NOT_SECRETS:
        return
    with _lock:
        new = _variants(text) - _values
        if new:
            _values.update(new)
            _pattern = None


def register_secrets(params: Mapping[str, Any]) -> None:
    """Register the values of every credential-named key of `params` (environment, RuleParameters)."""
    for key, value in list(params.items()):
        if is_secret_name(str(key)) and isinstance(value, (str, bytes, int, float)):
            register_secret(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)


def register_from_environment() -> None:
    """Register the credential-named variables of this process's environment."""
    register_secrets(os.environ)


def clear_registered_secrets() -> None:
    """Forget every registered value (tests)."""
    global _pattern
    with _lock:
        _values.clear()
        _pattern = None


def redact_url(url: Any) -> str:
    """Scheme, host and port of a URL, its path, query and credentials masked: webhook URLs
    (Slack, Teams) carry their secret in the path (``https://hooks.slack.com/***``)."""
    from urllib.parse import urlsplit

    text = str(url).strip()
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # an unparsable port: nothing of it is shown
        return MASK
    if not parts.scheme or not host:
        return MASK
    if ":" in host:  # IPv6
        host = f"[{host}]"
    rest = parts.path.strip("/") or parts.query or parts.fragment or parts.username
    return f"{parts.scheme}://{host}{port}" + (f"/{MASK}" if rest else "")


def register_url(url: Any) -> None:
    """Scrub a secret-bearing URL from all text `redact` sees from now on: the whole URL, and
    its path and query on their own (an error may quote either)."""
    from urllib.parse import urlsplit

    text = str(url).strip()
    register_secret(text)
    try:
        parts = urlsplit(text)
    except ValueError:
        return
    if parts.path.strip("/"):
        register_secret(parts.path)
        register_secret(parts.path.strip("/"))
    if parts.query:
        register_secret(parts.query)
    if parts.password:
        register_secret(parts.password)


def _value_pattern() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and _values:
            ordered = sorted(_values, key=len, reverse=True)  # longest first: no partial leftovers
            _pattern = re.compile("|".join(re.escape(v) for v in ordered))
        return _pattern


def _mask_pair(m: re.Match[str]) -> str:
    group = "qvalue" if m.group("vq") else "bvalue"
    if not m.group(group) or not is_secret_name(m.group("key")):
        return m.group(0)
    start, end = m.span(group)
    base = m.start(0)
    text = m.group(0)
    return text[: start - base] + MASK + text[end - base :]


def redact(text: Any) -> str:
    """`text` (anything; str() is taken) with credentials replaced by ``***``."""
    if not isinstance(text, str):
        text = str(text)
    pattern = _value_pattern()
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{MASK}@", text)
    if "=" in text or ":" in text:
        text = _PAIR.sub(_mask_pair, text)
    return text


def redact_value(key: str, value: Any) -> Any:
    """The value to show for `key`: masked when the key names a credential, else scrubbed text."""
    if is_secret_name(str(key)):
        return MASK
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return redact_mapping(value)
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value("", v) for v in value)
    return value


def redact_mapping(params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `params` that is safe to print (nested dicts and lists included)."""
    return {k: redact_value(str(k), v) for k, v in params.items()}


class RedactingFilter(logging.Filter):
    """Scrubs each record's final message, exception text and stack text before any handler
    formats it; the record's arguments are folded into the message."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_smdebug_redacted", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: let logging report it as usual
            return True
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        record._smdebug_redacted = True
        return True


_FILTER = RedactingFilter()


def redacting_filter() -> RedactingFilter:
    """The shared filter instance (adding it twice to a logger or handler is a no-op)."""
    return _FILTER


class RedactingStream:
    """A text stream wrapper that scrubs everything written through it (print, tracebacks).

    Used by the rule runner for its own stdout/stderr, so text that bypasses logging (a rule's
    print, an uncaught thread exception) is scrubbed too.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
