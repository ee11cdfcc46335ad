"""What runs once a hook has finished writing its trial, supplied by the layers above hooks.

At close, after the collections file and the end marker, the chief worker's hook calls
`trial_written(out_dir)`. Work on the written trial that belongs to the reading side (the
index compaction of `smdebug_lite.index.compact`) is registered here by the package
(`smdebug_lite/__init__.py`), so hooks import nothing of the reading side. Like `stop_signal`,
this module sits below both.
"""

from __future__ import annotations

from collections.abc import Callable

from smdebug_lite.logger import get_logger

TrialWritten = Callable[[str], object]  # called with the out_dir of the trial written

logger = get_logger(__name__)

_listeners: list[TrialWritten] = []


def add_listener(listener: TrialWritten) -> None:
    """Call `listener` after each trial a chief hook writes (once, however often added)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: TrialWritten) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def trial_written(out_dir: str) -> None:
    """Tell every listener, in the order added. A failing listener is logged and the others
    still run: the trial is complete and readable without what they do."""
    for listener in list(_listeners):
        try:
            listener(out_dir)
        except Exception as e:
            name = getattr(listener, "__name__", repr(listener))
            logger.warning("smdebug-lite could not finish %s after writing it (%s): %s",
                           out_dir, name, e)
