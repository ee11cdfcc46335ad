"""The webhook rule action against a real HTTP server on 127.0.0.1: one POST per rule per job
(through invoke_rule, the rule runner's evaluation and `smdebug-lite rules`), Slack's payload
and plain JSON, retries with backoff, a server that never answers, and secrets kept out of
every log line and error."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import pytest
from test_rules_helpers import scalar_steps, write_trial
from typer.testing import CliRunner
from webhook_server import HANG, webhook_server

from smdebug_lite.cli.app import build_app
from smdebug_lite.log import redact
from smdebug_lite.rule_runner.evaluation import RuleJob, evaluate_job
from smdebug_lite.rules import Actions, Rule, invoke_rule
from smdebug_lite.rules.actions import RuleEvent, WebhookAction
from smdebug_lite.rules.actions.webhook import backoff_s
from smdebug_lite.rules.actions.webhook_payload import payload
from smdebug_lite.trials import create_trial

PATH_SECRET = "services/T0SECRET1/B0SECRET2/xoxb-path-secret-9f8e7d"
HEADER_SECRET = "Bearer hdr-secret-4c3b2a19"


class FlagsAt(Rule):
    """Fires at `step`, giving its reason in the report as built-in rules do."""

    def __init__(self, base_trial, step="2", action_str=None):
        super().__init__(base_trial, action_str)
        self.at = int(step)

    def invoke_at_step(self, step):
        if step >= self.at:
            self.report["Details"] = {"step": step, "reason": f"loss {step}.0 is over the limit"}
            return True
        return False


@pytest.fixture(autouse=True)
def fresh_secrets() -> Iterator[None]:
    yield
    redact.clear_registered_secrets()
    redact.register_from_environment()


@pytest.fixture
def trial_dir(tmp_path) -> str:
    return write_trial(str(tmp_path / "run"), scalar_steps(6))


def action_json(url: str, **extra) -> str:
    return json.dumps([{"name": "webhook", "url": url, "headers": {"Authorization": HEADER_SECRET},
                        **extra}])


def no_secrets(text: str) -> None:
    for secret in (PATH_SECRET, "T0SECRET1", "xoxb-path-secret", HEADER_SECRET, "hdr-secret"):
        assert secret not in text, f"{secret!r} leaked: {text[:2000]}"


def test_one_post_per_rule_per_job_in_slack_shape(trial_dir, caplog):
    with webhook_server() as server, caplog.at_level(logging.DEBUG, logger="smdebug_lite"):
        rule = FlagsAt(create_trial(trial_dir), "3", action_json(f"{server.url}/{PATH_SECRET}"))
        result = invoke_rule(rule)
        assert (result.status, result.step) == ("IssuesFound", 3)
        # The rule fires again (a caller looping over steps itself): no second message.
        with pytest.raises(Exception, match="at step 4"):
            rule.invoke(4)
        assert len(server.received) == 1
    got = server.received[0]
    assert got.path == f"/{PATH_SECRET}"
    assert got.headers["Authorization"] == HEADER_SECRET
    assert got.headers["Content-Type"] == "application/json"
    body = got.json()
    assert set(body) == {"text", "blocks"}
    assert "rule FlagsAt found issues at step 3" in body["text"] and trial_dir in body["text"]
    assert "loss 3.0 is over the limit" in body["text"]
    fields = " ".join(f["text"] for f in body["blocks"][1]["fields"])
    assert "*Rule*\nFlagsAt" in fields and "*Status*\nIssuesFound" in fields
    assert "*Step*\n3" in fields and trial_dir in fields
    assert body["blocks"][2]["text"]["text"] == "*Evidence*\nloss 3.0 is over the limit"
    action = rule.actions.actions[0]
    assert action.delivered and action.attempts == 1 and action.last_status == 200
    assert "notified (HTTP 200)" in caplog.text and "already notified" in caplog.text
    no_secrets(caplog.text)


def test_json_format_and_actions_invoke_without_an_event():
    with webhook_server() as server:
        actions = Actions(action_json(f"{server.url}/{PATH_SECRET}", format="json"), "MyRule")
        actions.invoke("something happened")
        actions.invoke("something happened again")
    assert len(server.received) == 1
    body = server.received[0].json()
    assert body["rule"] == "MyRule" and body["status"] == "IssuesFound"
    assert body["message"] == "something happened" and body["step"] is None
    assert body["source"] == "smdebug-lite" and body["time"].endswith("Z")


def test_each_rule_of_the_rule_runner_and_the_cli_posts_once(trial_dir, tmp_path):
    rule_file = tmp_path / "my_rules.py"
    rule_file.write_text(
        "from smdebug.rules import Rule\n\n"
        "class AtThree(Rule):\n"
        "    def __init__(self, base_trial, action_str=None):\n"
        "        super().__init__(base_trial, action_str)\n\n"
        "    def invoke_at_step(self, step):\n"
        "        return step == 3\n")
    with webhook_server() as server:
        url = f"{server.url}/{PATH_SECRET}"
        outcome = evaluate_job(RuleJob(trial_dir, "AtThree", rule_file=str(rule_file),
                                       action_json=action_json(url)))
        assert (outcome.status, outcome.step) == ("IssuesFound", 3)
        assert len(server.received) == 1
        assert server.received[0].json()["blocks"][1]["fields"][0]["text"] == "*Rule*\nAtThree"

        # Two rules, one job each: one message each. The actions come from a file.
        actions_file = tmp_path / "actions.json"
        actions_file.write_text(action_json(url, format="json"))
        r = CliRunner().invoke(build_app(), [
            "rules", trial_dir, "--rule", "AtThree", "--rule", "LossNotDecreasing",
            "--rule-file", str(rule_file), "--action-json", f"@{actions_file}", "--json"])
        assert r.exit_code == 2, r.output  # LossNotDecreasing is not in the rule file
        assert len(server.received) == 2
        assert server.received[1].json()["rule"] == "AtThree"

        r = CliRunner().invoke(build_app(), [
            "rules", trial_dir, "--rule", "LossNotDecreasing", "-p", "mode=TRAIN",
            "-p", "num_steps=2", "-p", "tensor_regex=loss", "--action-json", f"@{actions_file}", "--json"])
        assert r.exit_code == 1, r.output  # a loss going up every step
        assert len(server.received) == 3
        sent = server.received[2].json()
        assert sent["rule"] == "LossNotDecreasing" and sent["evidence"]
        assert sent["step"] == json.loads(r.stdout)[0]["step"]
    no_secrets(r.output)


def test_retries_after_server_errors_with_backoff(trial_dir, caplog):
    assert [backoff_s(n) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff_s(1, "3") == 3.0 and backoff_s(1, "600") == 8.0 and backoff_s(2, "x") == 1.0
    with webhook_server([500, 500]) as server, \
            caplog.at_level(logging.DEBUG, logger="smdebug_lite"):
        rule = FlagsAt(create_trial(trial_dir), "1", action_json(f"{server.url}/{PATH_SECRET}"))
        started = time.monotonic()
        result = invoke_rule(rule)
        took = time.monotonic() - started
    assert result.status == "IssuesFound"
    assert len(server.received) == 3
    assert len({r.body for r in server.received}) == 1  # the same message each time
    action = rule.actions.actions[0]
    assert action.delivered and action.attempts == 3 and action.last_status == 200
    assert took >= 1.5  # 0.5 s then 1 s between the attempts
    text = caplog.text
    assert "attempt 1 of 4 failed (HTTP 500" in text and "retrying in 0.5s" in text
    assert "attempt 2 of 4 failed (HTTP 500" in text and "retrying in 1.0s" in text
    assert "http://127.0.0.1" in text and "/***" in text
    no_secrets(text)


def test_gives_up_on_a_client_error_and_after_the_last_retry(trial_dir, caplog):
    with webhook_server([403]) as server, caplog.at_level(logging.INFO, logger="smdebug_lite"):
        rule = FlagsAt(create_trial(trial_dir), "0", action_json(f"{server.url}/{PATH_SECRET}"))
        assert invoke_rule(rule).status == "IssuesFound"
        assert len(server.received) == 1  # 403 is final
    assert "not notified after 1 attempt(s): HTTP 403" in caplog.text
    with webhook_server([503, 503, 503]) as server:
        rule = FlagsAt(create_trial(trial_dir), "0",
                       action_json(f"{server.url}/{PATH_SECRET}", retries=2))
        invoke_rule(rule)
        assert len(server.received) == 3 and not rule.actions.actions[0].delivered
    no_secrets(caplog.text)


def test_a_server_that_never_answers_times_out_and_the_job_finishes(trial_dir, caplog):
    with webhook_server([HANG, HANG]) as server, \
            caplog.at_level(logging.INFO, logger="smdebug_lite"):
        url = f"{server.url}/{PATH_SECRET}"
        started = time.monotonic()
        outcome = evaluate_job(RuleJob(trial_dir, "LossNotDecreasing",
                                       params={"mode": "TRAIN", "num_steps": "2",
                                               "tensor_regex": "loss"},
                                       action_json=action_json(url, timeout=0.5, retries=1)))
        took = time.monotonic() - started
        assert len(server.received) == 2
    assert outcome.status == "IssuesFound"
    assert took < 20
    assert "timed out" in caplog.text and "not notified after 2 attempt(s)" in caplog.text
    no_secrets(caplog.text)
    no_secrets(outcome.message + (outcome.evidence or ""))


def test_nothing_listening(trial_dir, caplog):
    with webhook_server() as server:
        url = f"{server.url}/{PATH_SECRET}"
    with caplog.at_level(logging.INFO, logger="smdebug_lite"):
        rule = FlagsAt(create_trial(trial_dir), "0", action_json(url, retries=1))
        assert invoke_rule(rule).status == "IssuesFound"
    action = rule.actions.actions[0]
    assert not action.delivered and action.attempts == 2 and "Connection refused" in action.error
    no_secrets(caplog.text)
    no_secrets(action.error)


@pytest.mark.parametrize("entry, expected", [
    ({"url": f"ftp://files.example.com/{PATH_SECRET}"}, "must be an http:// or https:// URL"),
    ({"url": f"https:///{PATH_SECRET}"}, "must be an http:// or https:// URL"),
    ({"url": f"https://h.example.com:99999/{PATH_SECRET}"}, "not a valid URL"),
    ({}, "needs 'url'"),
    ({"url": f"https://h.example.com/{PATH_SECRET}", "format": "xml"}, "format='xml'"),
    ({"url": f"https://h.example.com/{PATH_SECRET}", "timeout": "soon"}, "timeout='soon'"),
    ({"url": f"https://h.example.com/{PATH_SECRET}", "retries": 99}, "retries=99"),
    ({"url": f"https://h.example.com/{PATH_SECRET}", "headers": ["x"]}, "'headers' must be"),
    ({"url": f"https://h.example.com/{PATH_SECRET}", "headers": {"X-Key": None}},
     "header 'X-Key' must have a string value"),
])
def test_bad_entries_are_skipped_without_showing_secrets(entry, expected, caplog):
    full = {"name": "webhook", "headers": {"Authorization": HEADER_SECRET}, **entry}
    with caplog.at_level(logging.ERROR, logger="smdebug_lite"):
        assert len(Actions(json.dumps([full]), "R")) == 0
    assert expected in caplog.text
    no_secrets(caplog.text)
    keys = {k.lower(): v for k, v in full.items()}
    with pytest.raises(ValueError) as err:
        WebhookAction.from_entry("R", keys)
    no_secrets(str(err.value))


def test_invalid_action_json_does_not_echo_its_text(caplog):
    text = '[{"name": "webhook", "url": "https://hooks.example.com/' + PATH_SECRET + '"'
    with caplog.at_level(logging.ERROR, logger="smdebug_lite"):
        assert len(Actions(text, "R")) == 0
    assert "not valid JSON" in caplog.text
    no_secrets(caplog.text)


def test_redact_url_and_registered_parts():
    assert redact.redact_url(f"https://hooks.slack.com/{PATH_SECRET}") == \
        "https://hooks.slack.com/***"
    assert redact.redact_url("http://127.0.0.1:8080/x?token=1") == "http://127.0.0.1:8080/***"
    assert redact.redact_url("https://user:pw@h.example.com") == "https://h.example.com/***"
    assert redact.redact_url("https://h.example.com/") == "https://h.example.com"
    assert redact.redact_url("not a url") == "***"
    url = f"https://hooks.slack.com/{PATH_SECRET}?k=query-secret-77"
    redact.register_url(url)
    for text in (url, f"POST /{PATH_SECRET} failed", "query k=query-secret-77 bad"):
        assert "secret" not in redact.redact(text).replace("***", "")


def test_payload_is_cut_to_slack_limits():
    event = RuleEvent("R" * 300, step=1, trial="/t", message="m", evidence="e" * 5000)
    body = json.loads(payload(event))
    assert len(body["blocks"][0]["text"]["text"]) <= 150
    assert len(body["blocks"][2]["text"]["text"]) <= 3000 and len(body["text"]) <= 3000
