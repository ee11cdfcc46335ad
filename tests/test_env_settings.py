"""Numeric and yes/no environment settings: the readers, and every place the library reads one.

A bad value is named in one warning (variable, value, what was expected, the default used) and
the default is used, or, for the trial's own knobs, raised as SMDebugValueError. Training never
stops over a setting: the training-side sites are checked in a real training process that ends
by SIGTERM, the analysis-side ones in a real rule-runner process.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import kept_log_records

from smdebug_lite.config.env_settings import env_bool, env_float, env_int
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.format.bounded_json import max_json_bytes
from smdebug_lite.index.reader import IndexReader
from smdebug_lite.rules.invoker import poll_interval
from smdebug_lite.rules.tensor_cache import TensorCache
from smdebug_lite.storage import LocalStorage
from smdebug_lite.storage.s3 import S3Storage
from smdebug_lite.trials import create_trial
from smdebug_lite.trials.value_reader import ValueReader
from smdebug_lite.writer.s3_uploader import upload_concurrency

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden" / "pt_basic"  # 25 steps, ended


@pytest.fixture
def warnings_seen():
    """The settings' warnings (the library's root logger does not propagate to pytest)."""
    yield from kept_log_records("smdebug_lite.config.env_settings")


def _messages(records: list[logging.LogRecord]) -> list[str]:
    return [r.getMessage() for r in records]


# -- the readers ---------------------------------------------------------------------------------


def test_env_int(monkeypatch, warnings_seen):
    assert env_int("SMDEBUG_T_INT_UNSET", 7) == 7
    monkeypatch.setenv("SMDEBUG_T_INT", " 12 ")
    assert env_int("SMDEBUG_T_INT", 7) == 12
    monkeypatch.setenv("SMDEBUG_T_INT", "   ")  # blank: the default, silently
    assert env_int("SMDEBUG_T_INT", 7) == 7
    assert warnings_seen == []
    monkeypatch.setenv("SMDEBUG_T_INT", "abc")
    assert env_int("SMDEBUG_T_INT", 7) == 7
    assert env_int("SMDEBUG_T_INT", 7) == 7  # read again: still one warning
    assert _messages(warnings_seen) == [
        "environment variable SMDEBUG_T_INT='abc' must be an integer; using the default 7"]
    monkeypatch.setenv("SMDEBUG_T_INT", "1.5")  # int() spelling only, as before
    assert env_int("SMDEBUG_T_INT", 7) == 7
    assert len(warnings_seen) == 2


def test_env_int_range_and_strict(monkeypatch, warnings_seen):
    monkeypatch.setenv("SMDEBUG_T_RANGE", "33")
    assert env_int("SMDEBUG_T_RANGE", 6, minimum=1, maximum=32) == 6
    assert _messages(warnings_seen) == ["environment variable SMDEBUG_T_RANGE='33' must be an "
                                        "integer from 1 to 32; using the default 6"]
    monkeypatch.setenv("SMDEBUG_T_RANGE", "32")
    assert env_int("SMDEBUG_T_RANGE", 6, minimum=1, maximum=32) == 32
    monkeypatch.setenv("SMDEBUG_T_STRICT", "many")
    with pytest.raises(SMDebugValueError, match=r"SMDEBUG_T_STRICT='many' must be an integer"):
        env_int("SMDEBUG_T_STRICT", 1, strict=True)
    assert len(warnings_seen) == 1  # raising does not warn too


def test_env_float(monkeypatch, warnings_seen):
    monkeypatch.setenv("SMDEBUG_T_FLOAT", "2.5")
    assert env_float("SMDEBUG_T_FLOAT", 1.0) == 2.5
    monkeypatch.setenv("SMDEBUG_T_FLOAT", "soon")
    assert env_float("SMDEBUG_T_FLOAT", 60.0, above=0.0) == 60.0
    monkeypatch.setenv("SMDEBUG_T_FLOAT", "0")
    assert env_float("SMDEBUG_T_FLOAT", 60.0, above=0.0) == 60.0
    monkeypatch.setenv("SMDEBUG_T_FLOAT", "nan")
    assert env_float("SMDEBUG_T_FLOAT", 60.0) == 60.0
    monkeypatch.setenv("SMDEBUG_T_FLOAT", "inf")
    assert env_float("SMDEBUG_T_FLOAT", 60.0) == 60.0
    assert env_float("SMDEBUG_T_FLOAT_UNSET", 60.0, finite=False) == 60.0
    assert _messages(warnings_seen) == [
        "environment variable SMDEBUG_T_FLOAT='soon' must be a positive number; "
        "using the default 60",
        "environment variable SMDEBUG_T_FLOAT='0' must be a positive number; using the default 60",
        "environment variable SMDEBUG_T_FLOAT='nan' must be a number; using the default 60",
        "environment variable SMDEBUG_T_FLOAT='inf' must be a number; using the default 60",
    ]
    monkeypatch.setenv("SMDEBUG_T_FLOAT_INF", "inf")  # where asked for, inf is a value
    assert env_float("SMDEBUG_T_FLOAT_INF", 1.0, finite=False) == float("inf")
    monkeypatch.setenv("SMDEBUG_T_FLOAT_NEG", "-1")
    with pytest.raises(SMDebugValueError,
                       match=r"SMDEBUG_T_FLOAT_NEG='-1' must be a non-negative number"):
        env_float("SMDEBUG_T_FLOAT_NEG", 1.0, minimum=0.0, strict=True)


@pytest.mark.parametrize("word, value", [("1", True), ("TRUE", True), ("yes", True),
                                         ("On", True), ("0", False), ("false", False),
                                         ("NO", False), ("off", False)])
def test_env_bool_spellings(monkeypatch, warnings_seen, word, value):
    monkeypatch.setenv("SMDEBUG_T_BOOL", f" {word} ")
    assert env_bool("SMDEBUG_T_BOOL", not value) is value
    assert warnings_seen == []


def test_env_bool_bad_value(monkeypatch, warnings_seen):
    monkeypatch.setenv("SMDEBUG_T_BOOL_BAD", "maybe")
    assert env_bool("SMDEBUG_T_BOOL_BAD", True) is True
    assert _messages(warnings_seen) == [
        "environment variable SMDEBUG_T_BOOL_BAD='maybe' must be one of "
        "0/1/false/no/off/on/true/yes; using the default True"]
    with pytest.raises(SMDebugValueError, match="SMDEBUG_T_BOOL_BAD='maybe'"):
        env_bool("SMDEBUG_T_BOOL_BAD", True, strict=True)


# -- the training side: warns, and training ends normally ----------------------------------------

TRAINING = textwrap.dedent("""
    import os, signal, sys
    from smdebug_lite.config.save_config import SaveConfig
    from smdebug_lite.hooks.core import HookCore

    hook = HookCore(sys.argv[1], save_config=SaveConfig(save_interval=1))
    for step in range(3):
        hook.start_step()
        hook.save_scalar("loss", float(step))
    print("trained", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # as a job scheduler stops a job: the hook is closed
""")

TRAINING_ENV = {
    "SMDEBUG_LOG_ALL_TO_STDOUT": "maybe",  # logger.py, at the first log
    "SMDEBUG_MAX_JSON_MB": "lots",  # format/bounded_json.py, at import
    "SMDEBUG_WRITER_MAX_PENDING_MB": "1.5",  # writer/writer_waits.py, at import
    "SMDEBUG_HANDLE_SIGTERM": "perhaps",  # hooks/shutdown.py, first hook
    "SMDEBUG_WRITER_START_TIMEOUT_S": "soon",  # writer/process/handle.py, first write
    "SMDEBUG_SIGTERM_CLOSE_TIMEOUT_S": "-1",  # hooks/shutdown.py, on SIGTERM
    "SMDEBUG_COMPACT": "sometimes",  # writer/compaction/compact.py, hook close
    "SMDEBUG_COMPACT_MIN_FILES": "abc",  # writer/compaction/compact.py, hook close
    "SMDEBUG_COMPACT_ROLLING": "often",  # writer/compaction/rolling.py, first step written
}


@pytest.fixture(scope="module")
def training_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("env") / "trial"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMDEBUG_")}
    env.update(TRAINING_ENV, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", TRAINING, str(out)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    return proc, out


@pytest.mark.parametrize("name, default", [
    ("SMDEBUG_LOG_ALL_TO_STDOUT", "True"), ("SMDEBUG_MAX_JSON_MB", "256"),
    ("SMDEBUG_WRITER_MAX_PENDING_MB", "512"), ("SMDEBUG_HANDLE_SIGTERM", "True"),
    ("SMDEBUG_WRITER_START_TIMEOUT_S", "60"), ("SMDEBUG_SIGTERM_CLOSE_TIMEOUT_S", "60"),
    ("SMDEBUG_COMPACT", "True"), ("SMDEBUG_COMPACT_MIN_FILES", "100"),
    ("SMDEBUG_COMPACT_ROLLING", "True"),
])
def test_a_bad_training_setting_warns_and_training_goes_on(training_run, name, default):
    proc, out = training_run
    text = proc.stdout + proc.stderr
    assert "trained" in proc.stdout, text
    # The handler stayed installed (the default): the hooks were closed, then the process
    # ended by SIGTERM as it would have without us.
    assert proc.returncode == -signal.SIGTERM, text
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines()
             if f"environment variable {name}={TRAINING_ENV[name]!r} must be" in line]
    assert lines and all(line.endswith(f"using the default {default}") for line in lines), text
    # The trial is whole: every step, and the end marker.
    assert create_trial(str(out)).steps() == [0, 1, 2]
    assert (out / "training_job_end.ts").is_file()


# -- the analysis side: the rule runner warns and evaluates ----------------------------------------

RULE_ENV = {
    "SMDEBUG_USE_MANIFEST": "maybe",  # index/reader.py
    "SMDEBUG_READER_CACHE_MB": "lots",  # trials/value_reader.py
    "SMDEBUG_READER_WHOLE_FILE_MB": "some",  # trials/value_reader.py
    "SMDEBUG_RULE_CACHE_MB": "big",  # rules/tensor_cache.py
    "SMDEBUG_RULE_POLL_INTERVAL_S": "fast",  # rules/invoker.py
    "SM_RULE_WAIT_LOG_S": "often",  # rule_runner/__main__.py
}


@pytest.fixture(scope="module")
def rule_run(tmp_path_factory) -> subprocess.CompletedProcess[str]:
    home = tmp_path_factory.mktemp("rule")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "HOME": str(home), **RULE_ENV}
    return subprocess.run(
        [sys.executable, "-m", "smdebug_lite.rule_runner", "--opt-ml", str(home / "opt_ml"),
         "--rule", "VanishingGradient", "--base-trial", str(GOLDEN)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name, default", [
    ("SMDEBUG_USE_MANIFEST", "True"), ("SMDEBUG_READER_CACHE_MB", "512"),
    ("SMDEBUG_READER_WHOLE_FILE_MB", "8"), ("SMDEBUG_RULE_CACHE_MB", "512"),
    ("SMDEBUG_RULE_POLL_INTERVAL_S", "1"), ("SM_RULE_WAIT_LOG_S", "30"),
])
def test_a_bad_analysis_setting_warns_and_the_rule_runs(rule_run, name, default):
    text = rule_run.stdout + rule_run.stderr
    assert rule_run.returncode == 0, text
    assert "steps evaluated: 25" in text, text
    warned = [line for line in text.splitlines()
              if f"environment variable {name}={RULE_ENV[name]!r} must be" in line]
    assert len(warned) == 1 and warned[0].endswith(f"using the default {default}"), text


# -- the other sites, in this process --------------------------------------------------------------


def test_s3_settings_warn_and_keep_their_defaults(monkeypatch, warnings_seen):
    monkeypatch.setenv("SMDEBUG_S3_MAX_ATTEMPTS", "eight")
    monkeypatch.setenv("SMDEBUG_S3_MAX_CONCURRENCY", "wide")
    storage = S3Storage("s3://bucket/trial", max_workers=16)
    assert (storage.max_attempts, storage.max_workers) == (8, 16)
    monkeypatch.setenv("SMDEBUG_S3_MAX_CONCURRENCY", "0")  # below 1 counts as 1, as before
    assert S3Storage("s3://bucket/trial").max_workers == 1
    monkeypatch.setenv("SMDEBUG_S3_UPLOAD_CONCURRENCY", "64")
    assert upload_concurrency() == 6  # was an error at the first S3 write
    assert _messages(warnings_seen) == [
        "environment variable SMDEBUG_S3_MAX_CONCURRENCY='wide' must be an integer; "
        "using the default 16",
        "environment variable SMDEBUG_S3_MAX_ATTEMPTS='eight' must be an integer; "
        "using the default 8",
        "environment variable SMDEBUG_S3_UPLOAD_CONCURRENCY='64' must be an integer from 1 to "
        "32; using the default 6",
    ]


def test_reader_and_rule_settings_in_process(monkeypatch, warnings_seen, tmp_path):
    monkeypatch.setenv("SMDEBUG_MAX_JSON_MB", "unbounded")
    assert max_json_bytes() == 256 << 20
    monkeypatch.setenv("SMDEBUG_USE_MANIFEST", "nope")
    assert IndexReader(LocalStorage(str(tmp_path))).use_manifest is True
    monkeypatch.setenv("SMDEBUG_READER_CACHE_MB", "half")
    assert ValueReader(LocalStorage(str(tmp_path))).cache_bytes == 512 << 20
    monkeypatch.setenv("SMDEBUG_RULE_CACHE_MB", "half")
    assert TensorCache().max_bytes == 512 << 20
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "-")
    assert poll_interval() == 1.0
    names = [m.split("=")[0].removeprefix("environment variable ")
             for m in _messages(warnings_seen)]
    assert names == ["SMDEBUG_MAX_JSON_MB", "SMDEBUG_USE_MANIFEST", "SMDEBUG_READER_CACHE_MB",
                     "SMDEBUG_RULE_CACHE_MB", "SMDEBUG_RULE_POLL_INTERVAL_S"]


# -- the trial's own knobs raise -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SMDEBUG_TRIAL_TIMEOUT", "SMDEBUG_TRIAL_POLL_INTERVAL",
                                  "SMDEBUG_TRIAL_REFRESH_INTERVAL", "SMDEBUG_TRIAL_END_GRACE",
                                  "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW",
                                  "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"])
def test_a_bad_trial_setting_raises_naming_it(monkeypatch, name):
    monkeypatch.setenv(name, "-2")
    with pytest.raises(SMDebugValueError, match=f"{name}='-2' must be a non-negative number"):
        create_trial(str(GOLDEN))
    monkeypatch.setenv(name, "later")
    with pytest.raises(SMDebugValueError, match=f"{name}='later'"):
        create_trial(str(GOLDEN))


def test_trial_timeout_may_still_be_inf(monkeypatch):
    monkeypatch.setenv("SMDEBUG_TRIAL_TIMEOUT", "inf")
    assert len(create_trial(str(GOLDEN)).steps()) == 25


def test_compat_index_reader_raises_naming_the_setting(monkeypatch):
    from smdebug_lite.compat.core.index_reader import LocalIndexReader

    monkeypatch.setenv("SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT", "ten")
    with pytest.raises(ValueError, match="SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT='ten'") as e:
        LocalIndexReader(str(GOLDEN))
    assert isinstance(e.value, SMDebugValueError)
    monkeypatch.setenv("SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT", "3")
    assert LocalIndexReader(str(GOLDEN)).event_file_retry_limit == 3
