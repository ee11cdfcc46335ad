"""smdebug-lite: a drop-in successor to Amazon SageMaker Debugger's smdebug library."""

from __future__ import annotations

from smdebug_lite import modes, trial_listeners
from smdebug_lite._version import __version__
from smdebug_lite.config import Collection as Collection
from smdebug_lite.config import CollectionKeys as CollectionKeys
from smdebug_lite.config import CollectionManager as CollectionManager
from smdebug_lite.config import ReductionConfig as ReductionConfig
from smdebug_lite.config import SaveConfig as SaveConfig
from smdebug_lite.config import SaveConfigMode as SaveConfigMode


def _compact_index(out_dir: str) -> None:
    """A chief hook's trial gets its index compacted once written. Registered here, above both
    sides: hooks must not import the reading side (smdebug_lite.index)."""
    from smdebug_lite.index.compact import compact_at_close

    compact_at_close(out_dir)


def _roll_index(out_dir: str, step: int) -> None:
    """The chief writer's trial is compacted block by block as it is written."""
    from smdebug_lite.index.rolling import step_written

    step_written(out_dir, step)


def _end_rolling(out_dir: str) -> None:
    from smdebug_lite.index.rolling import writing_ended

    writing_ended(out_dir)


trial_listeners.add_listener(_compact_index)
trial_listeners.add_step_listener(_roll_index, _end_rolling)

_CONFIG_EXPORTS = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
]

__all__ = ["__version__", "modes", *_CONFIG_EXPORTS]
