"""smdebug_lite.log.redact: credentials by name, by registered value and in URLs; never other values."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from smdebug_lite.log import redact as r


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    r.clear_registered_secrets()
    yield
    r.clear_registered_secrets()
    r.register_from_environment()


@pytest.mark.parametrize("name", [
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "api_token", "GITHUB_TOKEN", "token",
    "db_password", "DB_PASSWD", "MySecret", "x_api_key", "OPENAI_APIKEY", "api-key",
    "google_credentials", "ssh_private_key",
])
def test_secret_names(name: str) -> None:
    assert r.is_secret_name(name)


@pytest.mark.parametrize("name", [
    "threshold", "tokenizer", "max_tokens", "num_tokens_seen", "AWS_ACCESS_KEY_ID", "PWD",
    "base_trial", "keyword", "passage",
])
def test_other_names_stay_visible(name: str) -> None:
    assert not r.is_secret_name(name)


@pytest.mark.parametrize("text, expected", [
    ("AWS_SECRET_ACCESS_KEY=ab/cd+ef== threshold=0.1", "AWS_SECRET_ACCESS_KEY=*** threshold=0.1"),
    ("{'db_password': 'hunter2', 'threshold': '0.1'}", "{'db_password': '***', 'threshold': '0.1'}"),
    ('{"api_token": 12345, "n": 3}', '{"api_token": ***, "n": 3}'),
    ("(db_password='it\\'s', threshold='0.1')", "(db_password='***', threshold='0.1')"),
    ("password: hunter2, tokenizer=bert", "password: ***, tokenizer=bert"),
    ("auth_token = 'a b c'", "auth_token = '***'"),
    ("https://host:443/p?api_key=abc&x=1", "https://host:443/p?api_key=***&x=1"),
    ("s3://alice:pa55@bucket/key and https://h/x", "s3://alice:***@bucket/key and https://h/x"),
    ("AWS_SESSION_TOKEN=", "AWS_SESSION_TOKEN="),
    ("Error: step 3 failed", "Error: step 3 failed"),
])
def test_redact_by_name_and_url(text: str, expected: str) -> None:
    assert r.redact(text) == expected


def test_registered_values_are_scrubbed_anywhere() -> None:
    r.register_secrets({"AWS_SECRET_ACCESS_KEY": "AKIAxxxxSECRET", "db_password": "hu'nter2",
                        "threshold": "0.1234", "SOME_TOKEN": "true", "api_token": "abc"})
    text = "login refused for AKIAxxxxSECRET; repr 'hu\\'nter2' json \"hu'nter2\" th 0.1234"
    assert r.redact(text) == "login refused for ***; repr '***' json \"***\" th 0.1234"
    # flags and short values are not treated as secret text
    assert r.redact("flag true, id abc") == "flag true, id abc"


def test_environment_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "envtoken-42")
    monkeypatch.setenv("MY_THRESHOLD", "envthreshold-42")
    r.register_from_environment()
    assert r.redact("got envtoken-42 and envthreshold-42") == "got *** and envthreshold-42"


def test_redact_mapping() -> None:
    params = {"db_password": "hunter2", "threshold": "0.1", "nested": {"client_secret": "x"},
              "urls": ["s3://u:p4ss@b/k"], "count": 3}
    assert r.redact_mapping(params) == {"db_password": "***", "threshold": "0.1",
                                        "nested": {"client_secret": "***"},
                                        "urls": ["s3://u:***@b/k"], "count": 3}
    assert params["db_password"] == "hunter2"  # a copy


def test_library_loggers_are_filtered() -> None:
    from smdebug_lite.log.logger import get_logger

    r.register_secret("AKIAxxxxSECRET")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger("smdebug_lite")
    root.addHandler(handler)
    try:
        log = get_logger("trials.some_module")
        log.warning("key %s, api_token=%s, threshold=%s", "AKIAxxxxSECRET", "t0k3n", 0.1)
        try:
            raise ValueError("bad key AKIAxxxxSECRET")
        except ValueError:
            log.exception("failed")
    finally:
        root.removeHandler(handler)
    out = stream.getvalue()
    assert "key ***, api_token=***, threshold=0.1" in out
    assert "ValueError: bad key ***" in out
    assert "AKIAxxxxSECRET" not in out and "t0k3n" not in out
    assert r.redacting_filter() in root.filters


def test_redacting_stream() -> None:
    r.register_secret("hunter2")
    buf = io.StringIO()
    stream = r.RedactingStream(buf)
    print("password is hunter2", file=stream)
    stream.flush()
    assert buf.getvalue() == "password is ***\n"
