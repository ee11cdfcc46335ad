"""What runs while, and once, a hook writes its trial, supplied by the layers above hooks.

Work on a written trial belongs to the reading side (the index compaction of
`smdebug_lite.index`), which hooks and writers must not import. The package registers it here
(`smdebug_lite/__init__.py`) and the write side announces its progress:

* `steps_written(out_dir, step)`: the chief worker's writer has put step `step`'s files on
  storage (its index file last). Called for every step written, from the writer's own thread
  or process: a listener returns at once and does its work elsewhere.
* `writing_ended(out_dir)`: that writer is finishing; a listener completes or stops what it
  started on the trial before the writer reports itself closed.
* `trial_written(out_dir)`: the chief worker's hook has closed its trial (collections file
  and end marker written).

Like `stop_signal`, this module sits below both sides.
"""

from __future__ import annotations

from collections.abc import Callable

from smdebug_lite.logger import get_logger

TrialWritten = Callable[[str], object]  # called with the out_dir of the trial written
StepsWritten = Callable[[str, int], object]  # called with the out_dir and the step written

logger = get_logger(__name__)

_listeners: list[TrialWritten] = []
_step_listeners: list[tuple[StepsWritten, TrialWritten]] = []


def add_listener(listener: TrialWritten) -> None:
    """Call `listener` after each trial a chief hook writes (once, however often added)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: TrialWritten) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def add_step_listener(on_step: StepsWritten, on_end: TrialWritten) -> None:
    """Call `on_step` after each step a chief writer writes and `on_end` when that writer
    finishes (once per pair, however often added)."""
    if (on_step, on_end) not in _step_listeners:
        _step_listeners.append((on_step, on_end))


def remove_step_listener(on_step: StepsWritten, on_end: TrialWritten) -> None:
    if (on_step, on_end) in _step_listeners:
        _step_listeners.remove((on_step, on_end))


def trial_written(out_dir: str) -> None:
    """Tell every listener, in the order added. A failing listener is logged and the others
    still run: the trial is complete and readable without what they do."""
    for listener in list(_listeners):
        _call(listener, out_dir, "after writing it")


def steps_written(out_dir: str, step: int) -> None:
    """Tell every step listener that `step` is written. Never raises: the writer goes on."""
    for on_step, _ in list(_step_listeners):
        _call(on_step, out_dir, f"after step {step}", step)


def writing_ended(out_dir: str) -> None:
    """Tell every step listener that the writer of `out_dir` is finishing; returns once they
    have. Never raises."""
    for _, on_end in list(_step_listeners):
        _call(on_end, out_dir, "as its writer finished")


def _call(listener: Callable[..., object], out_dir: str, when: str, *args: object) -> None:
    try:
        listener(out_dir, *args)
    except Exception as e:
        name = getattr(listener, "__name__", repr(listener))
        logger.warning("smdebug-lite could not finish %s %s (%s): %s", out_dir, when, name, e)
