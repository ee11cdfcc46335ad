"""``smdebug.core.state_store``: step counters kept beside the checkpoints, smdebug's interface.

Built on smdebug_lite's `TrainingState`, so the checkpoint directory comes from the same config
(``CHECKPOINT_CONFIG_FILE_PATH``, else SageMaker's checkpointconfig.json), the states file is the
same ``<checkpoint dir>/metadata.json`` (a JSON list of states, keeping the newest
``KEEP_STATES``), and checkpoint changes are seen the same way: any checkpoint file added,
removed, resized or rewritten since the last look. The states file itself is not a checkpoint.
"""

from __future__ import annotations

import json
from typing import Any

from smdebug_lite.compat.core.config_constants import LATEST_GLOBAL_STEP_SEEN
from smdebug_lite.compat.core.logger import get_logger
from smdebug_lite.exceptions import SMDebugRuntimeError
from smdebug_lite.hooks.training_state import (
    KEEP_STATES,
    METADATA_FILE,
    TrainingState,
    checkpoint_dir,
)
from smdebug_lite.storage import LocalStorage

logger = get_logger()


def _by_step_seen(states: list[Any]) -> list[Any]:
    """States ordered by the global step they saw (file order when that cannot be compared)."""
    try:
        return sorted(states, key=lambda s: s[LATEST_GLOBAL_STEP_SEEN])
    except (KeyError, TypeError, IndexError):
        return list(states)


class StateStore:
    """The states recorded so far, and whether checkpoints changed since the last look."""

    def __init__(self) -> None:
        self._checkpoint_dir = checkpoint_dir()
        self._states_file: str | None = None
        self._saved_states: list[Any] = []
        self._training_state: TrainingState | None = None
        self._signature: tuple = ()
        if self._checkpoint_dir is not None:
            self._training_state = TrainingState(self._checkpoint_dir)
            self._states_file = self._training_state.path
            self._saved_states = _by_step_seen(self._training_state.states)
            self._signature = self._training_state.checkpoint_signature()

    def is_checkpoint_updated(self) -> bool:
        """True once for each change of the checkpoint files (none configured or present: False)."""
        if self._training_state is None:
            return False
        signature = self._training_state.checkpoint_signature()
        if not signature:
            logger.debug("no checkpoint files in %s yet", self._checkpoint_dir)
            return False
        if signature == self._signature:
            return False
        self._signature = signature
        return True

    def get_last_saved_state(self) -> Any:
        """The state with the latest global step seen, or None when none was recorded."""
        return self._saved_states[-1] if self._saved_states else None

    def update_state(self, ts_state: Any) -> None:
        """Append a state and rewrite the states file atomically."""
        if self._training_state is None or self._checkpoint_dir is None:
            raise SMDebugRuntimeError(
                "update_state: no checkpoint directory is configured (CHECKPOINT_CONFIG_FILE_PATH "
                "or /opt/ml/input/config/checkpointconfig.json with a LocalPath)"
            )
        self._saved_states.append(ts_state)
        del self._saved_states[:-KEEP_STATES]
        self._training_state.states = list(self._saved_states)
        LocalStorage(self._checkpoint_dir).write_atomic(
            METADATA_FILE, json.dumps(self._saved_states).encode()
        )


__all__ = ["StateStore"]
