"""``smdebug.core.tfrecord.tensor_reader``: tensors from records already in memory.

What the index reader uses on the bytes of one record (or several) fetched by offset and length.
"""

from __future__ import annotations

from collections.abc import Iterator

from smdebug_lite.compat.core.tfevent.event_file_reader import EventSource, mode_of
from smdebug_lite.compat.core.tfrecord.record_reader import read_framed_record
from smdebug_lite.exceptions import SMDebugRuntimeError
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.modes import ModeKeys


class TensorReader(EventSource):
    def __init__(self, data: bytes) -> None:
        self.position = 0
        self.data = data
        self.max_pos = len(data)

    def _read(self, n: int) -> bytes:
        if self.position + n > self.max_pos:
            raise SMDebugRuntimeError(
                f"truncated record: {n} bytes wanted at offset {self.position}, "
                f"{self.max_pos - self.position} left"
            )
        data = self.data[self.position : self.position + n]
        self.position += n
        return data

    def read_record(self, check: object = "minimal") -> bytes:
        return read_framed_record(self._read, check, f"record at offset {self.position}")

    def _get_mode_modestep(self, step: int, plugin_data) -> tuple[ModeKeys, int]:  # noqa: ANN001
        return mode_of(step, plugin_data)

    def read_events(self, check: object = "minimal") -> Iterator[pb.Event]:
        while self.has_data():
            yield pb.Event.FromString(self.read_record(check=check))

    def has_data(self) -> bool:
        return self.position < self.max_pos
