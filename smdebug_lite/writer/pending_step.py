"""One saved step of one worker, pending: its tensors and shapes gathered in memory until a
writer encodes its two files at once (`StepFileWriter`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from smdebug_lite.format.index_file import IndexDocument, ShapeEntry, TensorEntry
from smdebug_lite.format.inline_value import inline_for_record
from smdebug_lite.format.locations import event_file_name, index_file_name
from smdebug_lite.format.tensor_codec import encode_tensor_record
from smdebug_lite.modes import ModeKeys


class PendingStep:
    """Holds a step in memory; encoding happens later, off the training thread.

    The index file's meta holds a single mode for the whole file, which is why a pending step
    belongs to exactly one (step, mode, mode_step).
    """

    __slots__ = ("step", "worker", "mode", "mode_step", "tensors", "shapes", "on_written",
                 "repeat", "on_submitted", "token")

    def __init__(self, step: int, worker: str, mode: ModeKeys, mode_step: int) -> None:
        self.step = step
        self.worker = worker
        self.mode = mode
        self.mode_step = mode_step
        # (name, value, wall time) and shape entries, in the order added
        self.tensors: list[tuple[str, np.ndarray, float]] = []
        self.shapes: list[ShapeEntry] = []
        # Called (on the writer's thread) once the step's files are written: the arrays are no
        # longer needed, so a hook may reuse their memory.
        self.on_written: Callable[[], None] | None = None
        # (a writer process's template, its number of tensors, wall time): the step is those
        # tensors again, in the same buffers (see `ProcessTrialWriter.submit`); none added here.
        self.repeat: tuple[object, int, float] | None = None
        # Called with what `submit` returned: the writer's template the step now is, or None.
        self.on_submitted: Callable[[object], None] | None = None
        self.token = -1  # a writer process's token for it, once submitted there

    def add_tensor(self, name: str, value: np.ndarray, wall_time: float | None = None) -> None:
        """Keep a reference: callers pass arrays they will not mutate (hooks copy first)."""
        self.tensors.append((name, value, time.time() if wall_time is None else wall_time))

    def add_tensors(self, entries: list[tuple[str, np.ndarray, float]]) -> None:
        """`add_tensor` for a whole step's (name, value, wall time) at once."""
        self.tensors += entries

    def add_shape(self, name: str, shape: tuple[int, ...], original_name: str | None = None) -> None:
        self.shapes.append(ShapeEntry(name, original_name or name, tuple(int(d) for d in shape)))

    @property
    def nbytes(self) -> int:
        """Bytes of the step's arrays (the thread writer bounds what is pending by it)."""
        return sum(getattr(value, "nbytes", 0) for _, value, _ in self.tensors)

    def __len__(self) -> int:
        return len(self.tensors) + len(self.shapes) + (self.repeat[1] if self.repeat else 0)

    @property
    def tensor_names(self) -> list[str]:
        return [t[0] for t in self.tensors]

    @property
    def event_file_name(self) -> str:
        return event_file_name(self.step, self.worker)

    @property
    def index_file_name(self) -> str:
        return index_file_name(self.step, self.worker)

    def encode(self, base_offset: int = 0) -> tuple[list, IndexDocument]:
        """(event file chunks, index document); offsets start at `base_offset` (for appends)."""
        chunks: list = []
        entries: list[TensorEntry] = []
        offset = base_offset
        mode_value = self.mode.value
        for name, value, wall_time in self.tensors:
            rec = encode_tensor_record(name, value, self.step, mode_value, self.mode_step, wall_time)
            chunks.extend(rec.chunks)
            entries.append(TensorEntry(name, offset, rec.length, rec.crc, rec.stored_dtype,
                                       rec.shape, rec.content_offset, rec.orig_dtype,
                                       inline_for_record(value, rec.stored_dtype,
                                                         rec.orig_dtype)))
            offset += rec.length
        # A shape entry beside the raw tensor of the same name makes smdebug 1.0.34 lose the
        # value (its index merge replaces the location with the shape); the raw tensor's entry
        # records the shape anyway, so the shape entry is only written on its own.
        raw = {e.name for e in entries}
        shapes = [s for s in self.shapes if s.name not in raw]
        doc = IndexDocument(self.step, self.worker, self.mode, self.mode_step,
                            self.event_file_name, entries, shapes)
        return chunks, doc
