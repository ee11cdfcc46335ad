"""The local "stop training" signal between rules and hooks: a file in the training's out_dir.

A rule's stop-signal action writes ``<out_dir>/smdebug_rule_stop_signal.json`` (an ``s3://``
out_dir works too); a training loop asks its hook ``hook.stop_requested()``, which polls for it.
This module sits below both, so that neither imports the other. The file lies next to
``training_job_end.ts``, outside ``index/``, ``events/`` and ``collections/``, so trial readers
never see it. Its content is JSON, ``{"rule": ..., "message": ..., "time": ...}`` (epoch
seconds); only its existence matters. (SageMaker's own StopTraining action needs a real
training job; this convention works anywhere.)

Each function takes the out_dir as a path or URI (rules name it so) or as the `Storage` a hook
already holds for it (`StopSignalPoller` is always given that one).
"""

from __future__ import annotations

import json
import time
from typing import Any

from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage, open_storage

STOP_SIGNAL_FILE = "smdebug_rule_stop_signal.json"

logger = get_logger(__name__)


def _storage(out_dir: str | Storage) -> Storage:
    return open_storage(out_dir) if isinstance(out_dir, str) else out_dir


def stop_signal_path(out_dir: str | Storage) -> str:
    """Full path (or URI) of the signal file for an out_dir."""
    if not isinstance(out_dir, str):
        return out_dir.uri(STOP_SIGNAL_FILE)
    return out_dir.rstrip("/") + "/" + STOP_SIGNAL_FILE


def write_stop_signal(out_dir: str | Storage, rule_name: str, message: str = "") -> str:
    """Create the signal file atomically; returns its path."""
    doc = {"rule": rule_name, "message": message, "time": time.time()}
    _storage(out_dir).write_atomic(STOP_SIGNAL_FILE, json.dumps(doc).encode("utf-8"))
    return stop_signal_path(out_dir)


def read_stop_signal(out_dir: str | Storage) -> dict[str, Any] | None:
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


def stop_requested(out_dir: str | Storage) -> bool:
    """True once a rule has asked the training writing to `out_dir` to stop."""
    try:
        return _storage(out_dir).exists(STOP_SIGNAL_FILE)
    except Exception as e:
        logger.debug("could not check stop signal under %s: %s", out_dir, e)
        return False


def clear_stop_signal(out_dir: str | Storage) -> None:
    """Remove the signal (a new run reusing the out_dir should not stop at once)."""
    try:
        _storage(out_dir).delete(STOP_SIGNAL_FILE)
    except FileNotFoundError:
        pass


class StopSignalPoller:
    """`should_stop()` checks storage at most every `interval_s` seconds (for S3 each check is
    a request); once true, stays true. `out_dir`: a path or URI is opened once, here."""

    def __init__(self, out_dir: str | Storage, interval_s: float = 5.0) -> None:
        self.storage = _storage(out_dir)
        self.interval_s = interval_s
        self._next = 0.0
        self._stop = False

    def should_stop(self) -> bool:
        if self._stop:
            return True
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval_s
            self._stop = stop_requested(self.storage)
        return self._stop

    def check_now(self) -> None:
        """Make the next `should_stop` look at storage whatever the interval."""
        self._next = 0.0


__all__ = [
    "STOP_SIGNAL_FILE",
    "StopSignalPoller",
    "clear_stop_signal",
    "read_stop_signal",
    "stop_requested",
    "stop_signal_path",
    "write_stop_signal",
]
