"""`ReadAhead`: when a tensor is read step after step, the next steps are fetched in one go.

Code that walks a history one step at a time (`tensor.value(s)` in a loop, a rule's
`invoke_at_step`) would otherwise read one event file per step, where `Tensor.values()` reads
the same records in one batched pass (`ValueReader.read_named`). A read continues a run when
the previous read of the same tensor, mode, worker and record was of the step just before it in
the tensor's list of steps; then the next `steps` listed steps (fewer if their records exceed
`max_bytes`) are fetched together into the reader's bounded cache, and the reads that follow
find them there. Other reads (random access, the first of a run) go as before. Only steps
listed as complete are fetched, so nothing is cached for a step not written yet; a fetch that
fails is dropped, and the read that needs the value meets the problem as it would have.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from smdebug_lite.config.env_settings import env_float, env_int

_MAX_CURSORS = 64  # (mode, worker, record) runs followed per tensor; all dropped past this


def ahead_settings() -> tuple[int, int]:
    """(steps, bytes) fetched ahead per run: `SMDEBUG_READER_AHEAD_STEPS` (0: never) and
    `SMDEBUG_READER_AHEAD_MB`."""
    steps = env_int("SMDEBUG_READER_AHEAD_STEPS", 128, minimum=0)
    megabytes = env_float("SMDEBUG_READER_AHEAD_MB", 64.0, minimum=0.0)
    return steps, int(megabytes * (1 << 20))


class Cursor:
    """One run: its key, the step read last, and how far ahead it was fetched. `ReadAhead`
    keeps the last one used as `current`, which a caller may test and advance itself (the
    usual read inside a fetched window: no call at all)."""

    __slots__ = ("key", "mode", "worker", "saved", "last", "until")

    def __init__(self, key: tuple, last: int) -> None:
        self.key = key  # (mode, worker, the saved reduction read or None for raw values)
        self.mode, self.worker, self.saved = key if key else (None, None, None)
        self.last = last  # the step read last
        self.until = -1  # fetched ahead up to this step


class ReadAhead:
    """The runs of one tensor's reads, and how far each was fetched ahead."""

    __slots__ = ("steps", "max_bytes", "current", "_cursors")

    def __init__(self, steps: int, max_bytes: int) -> None:
        self.steps = steps
        self.max_bytes = max_bytes
        self.current = Cursor((), 0)
        self._cursors: dict[tuple, Cursor] = {}

    def due(self, step: int, key: tuple, listed: Callable[[], list[int]]) -> int | None:
        """Note a read of `step` by the run `key` names. When it continues the run past what
        was fetched ahead, the position of `step` in `listed()` (the tensor's steps) to fetch
        from; else None."""
        c = self._cursors.get(key)
        if c is None:
            if len(self._cursors) >= _MAX_CURSORS:
                self._cursors.clear()
            self.current = self._cursors[key] = Cursor(key, step)
            return None
        self.current = c
        last = c.last
        c.last = step
        if step <= last or step <= c.until:
            return None
        steps = listed()
        pos = bisect.bisect_left(steps, step)
        if 0 < pos < len(steps) and steps[pos] == step and steps[pos - 1] == last:
            return pos
        return None

    def fetched(self, key: tuple, until: int) -> None:
        """The run `key` was fetched ahead up to step `until` (its reads up to there are
        served from memory, or read as before where the fetch failed)."""
        c = self._cursors.get(key)
        if c is not None:
            c.until = until
