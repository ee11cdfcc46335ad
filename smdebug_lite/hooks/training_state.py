"""Step counters that survive a restarted job (SageMaker managed spot training).

A spot job that is interrupted restarts from the user's last checkpoint, with a new hook that
would count steps from 0 again: its steps would overwrite the ones already uploaded. When a
checkpoint directory is configured (``checkpointconfig.json``'s ``LocalPath``, path in
``CHECKPOINT_CONFIG_FILE_PATH``), the hook notices checkpoints being written there and records
the step counters of that moment in ``<checkpoint dir>/metadata.json``, smdebug's file: a JSON
list of states with the keys ``training-run``, ``latest-global-step-saved``,
``latest-global-step-seen`` and ``latest-mode-step``. The directory is restored with the
checkpoint, and a new hook continues counting from the last state.

Checkpoint files are looked at no more than once per `CHECK_INTERVAL_S` (a directory scan on
every step would cost the training loop), and once more when the hook closes. The recorded step
may be a little later than the checkpoint's: a resumed run then skips a few step numbers. Steps
the interrupted run made after its last record are made again by the resumed run, under the
same numbers, and their files replace the lost run's.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from smdebug_lite.config.hook_json import HookConfigError, read_local_path
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import LocalStorage

logger = get_logger(__name__)

CHECKPOINT_CONFIG_ENV = "CHECKPOINT_CONFIG_FILE_PATH"
DEFAULT_CHECKPOINT_CONFIG = "/opt/ml/input/config/checkpointconfig.json"
METADATA_FILE = "metadata.json"
CHECK_INTERVAL_S = 1.0
KEEP_STATES = 100  # the file keeps the newest states only: a long job checkpoints many times


def checkpoint_dir() -> str | None:
    """The checkpoint directory SageMaker syncs, or None when no checkpoint config exists."""
    path = os.environ.get(CHECKPOINT_CONFIG_ENV, DEFAULT_CHECKPOINT_CONFIG)
    if not os.path.isfile(path):
        return None
    try:
        local = read_local_path(path)
    except HookConfigError as e:
        logger.warning("%s; step counters will not be kept across restarts", e)
        return None
    if local is None:
        logger.warning("%s: no \"LocalPath\" in the checkpoint config; step counters will not "
                       "be kept across restarts", path)
    return local


class TrainingState:
    """Reads the last recorded state once, and records a new one when checkpoints change."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, METADATA_FILE)
        self.states = self._load()
        runs = [s.get("training-run") for s in self.states]
        self.run = max((r for r in runs if isinstance(r, int)), default=-1) + 1
        self._signature = self.checkpoint_signature()
        self._next_check = time.monotonic() + CHECK_INTERVAL_S

    @classmethod
    def for_this_job(cls) -> TrainingState | None:
        directory = checkpoint_dir()
        return None if directory is None else cls(directory)

    @property
    def last(self) -> dict[str, Any] | None:
        return self.states[-1] if self.states else None

    def resume_counters(self) -> tuple[int, dict[ModeKeys, int], int | None] | None:
        """(global step, mode steps, last saved step) of the last state, or None."""
        state = self.last
        if state is None:
            return None
        try:
            step = int(state["latest-global-step-seen"])
            modes = {ModeKeys[name]: int(s) for name, s in state.get("latest-mode-step", {}).items()}
            saved = state.get("latest-global-step-saved")
            return step, modes, None if saved is None else int(saved)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            logger.warning("%s: the last state is malformed (%s: %s); counting steps from 0",
                           self.path, type(e).__name__, e)
            return None

    def maybe_record(self, step: int, mode_steps: dict[ModeKeys, int],
                     last_saved: int | None, now: bool = False) -> None:
        """Record the counters if checkpoint files changed since the last look (throttled,
        unless `now`)."""
        t = time.monotonic()
        if t < self._next_check and not now:
            return
        self._next_check = t + CHECK_INTERVAL_S
        signature = self.checkpoint_signature()
        if signature == self._signature:
            return
        self._signature = signature
        self.record(step, mode_steps, last_saved)

    def record(self, step: int, mode_steps: dict[ModeKeys, int], last_saved: int | None) -> None:
        self.states.append({
            "training-run": self.run,
            "latest-global-step-saved": last_saved,
            "latest-global-step-seen": step,
            "latest-mode-step": {m.name: s for m, s in mode_steps.items() if s >= 0},
        })
        del self.states[:-KEEP_STATES]
        try:
            LocalStorage(self.directory).write_atomic(METADATA_FILE, json.dumps(self.states).encode())
        except OSError as e:
            logger.warning("cannot record the step counters in %s (%s)", self.path, e)

    def _load(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                states = json.load(f)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as e:
            logger.warning("%s: unreadable (%s); counting steps from 0", self.path, e)
            return []
        if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
            logger.warning("%s: expected a JSON list of states; counting steps from 0", self.path)
            return []
        return states

    def checkpoint_signature(self) -> tuple:
        """(name, size, mtime) of every checkpoint file; ours (and its temporary files, named
        after it) are left out, so recording a state is not taken for a new checkpoint."""
        found = []
        for root, _dirs, files in os.walk(self.directory):
            for name in files:
                if root == self.directory and name.startswith(METADATA_FILE):
                    continue
                try:
                    st = os.stat(os.path.join(root, name))
                except OSError:
                    continue
                found.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
        return tuple(sorted(found))
