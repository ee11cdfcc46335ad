"""A local "stop training" signal: a rule writes a file into the training's out_dir and the
training hook polls for it.

This is smdebug-lite's own convention (SageMaker's StopTraining action needs a real training
job). The file is ``<out_dir>/smdebug_rule_stop_signal.json`` (an ``s3://`` out_dir works too),
next to ``training_job_end.ts`` and outside ``index/``, ``events/`` and ``collections/``, so
trial readers never see it. Its content is JSON: ``{"rule": ..., "message": ..., "time": ...}``
(time in epoch seconds); only its existence matters.

Hooks call ``stop_requested(out_dir)``; for S3 each call is a request, so poll with
``StopSignalPoller`` (rate-limited) rather than on every step.
"""

from __future__ import annotations

import json
import time
from typing import Any

from smdebug_lite.logger import get_logger

STOP_SIGNAL_FILE = "smdebug_rule_stop_signal.json"

logger = get_logger(__name__)


def _storage(out_dir: str) -> Any:
    from smdebug_lite.storage import open_storage

    return open_storage(out_dir)


def stop_signal_path(out_dir: str) -> str:
    """Full path (or URI) of the signal file for an out_dir."""
    return out_dir.rstrip("/") + "/" + STOP_SIGNAL_FILE


def write_stop_signal(out_dir: str, rule_name: str, message: str = "") -> str:
    """Create the signal file atomically; returns its path."""
    doc = {"rule": rule_name, "message": message, "time": time.time()}
    _storage(out_dir).write_atomic(STOP_SIGNAL_FILE, json.dumps(doc).encode("utf-8"))
    return stop_signal_path(out_dir)


def read_stop_signal(out_dir: str) -> dict[str, Any] | None:
    """The signal's content, or None when there is no signal (or it cannot be read)."""
    try:
        data = _storage(out_dir).read(STOP_SIGNAL_FILE)
    except FileNotFoundError:
        return None
    except Exception as e:  # a flaky read must not stop training, nor crash it
        logger.debug("could not read stop signal under %s: %s", out_dir, e)
        return None
    try:
        doc = json.loads(data.decode("utf-8") or "{}")
    except ValueError:
        doc = {}
    return doc if isinstance(doc, dict) else {}


def stop_requested(out_dir: str) -> bool:
    """True once a rule has asked the training writing to `out_dir` to stop."""
    try:
        return _storage(out_dir).exists(STOP_SIGNAL_FILE)
    except Exception as e:
        logger.debug("could not check stop signal under %s: %s", out_dir, e)
        return False


def clear_stop_signal(out_dir: str) -> None:
    """Remove the signal (a new run reusing the out_dir should not stop at once)."""
    try:
        _storage(out_dir).delete(STOP_SIGNAL_FILE)
    except FileNotFoundError:
        pass


class StopSignalPoller:
    """`should_stop()` checks storage at most every `interval_s` seconds; once true, stays true."""

    def __init__(self, out_dir: str, interval_s: float = 5.0) -> None:
        self.out_dir = out_dir
        self.interval_s = interval_s
        self._next = 0.0
        self._stop = False

    def should_stop(self) -> bool:
        if self._stop:
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval_s
            self._stop = stop_requested(self.out_dir)
        return self._stop


class StopSignalAction:
    """Action ``{"name": "stopsignal", "path": <out_dir>}``; path defaults to the base trial's."""

    name = "stopsignal"

    def __init__(self, rule_name: str, out_dir: str) -> None:
        self.rule_name = rule_name
        self.out_dir = out_dir
        self.written: str | None = None

    def invoke(self, message: str = "") -> None:
        try:
            self.written = write_stop_signal(self.out_dir, self.rule_name, message)
            logger.info("Rule %s wrote a stop signal to %s", self.rule_name, self.written)
        except Exception as e:
            logger.error("Rule %s could not write a stop signal under %s: %s",
                         self.rule_name, self.out_dir, e)
