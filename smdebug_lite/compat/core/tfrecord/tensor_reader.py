"""``smdebug.core.tfrecord.tensor_reader``: tensors from records already in memory.

What the index reader uses on the bytes of one record (or several) fetched by offset and length.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from smdebug_lite.compat.core.tfevent.event_file_reader import (
    TensorTuple,
    mode_of,
    summaries_of,
    tensors_of,
)
from smdebug_lite.compat.core.tfrecord.record_reader import check_length_crc, check_payload_crc
from smdebug_lite.exceptions import SMDebugRuntimeError
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.modes import ModeKeys

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class TensorReader:
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
        where = f"record at offset {self.position}"
        length_bytes = self._read(8)
        (length,) = _U64.unpack(length_bytes)
        (saved_len_crc,) = _U32.unpack(self._read(4))
        check_length_crc(length_bytes, saved_len_crc, check, where)
        payload = self._read(length)
        (saved_payload_crc,) = _U32.unpack(self._read(4))
        check_payload_crc(payload, saved_payload_crc, check, where)
        return payload

    def _get_mode_modestep(self, step: int, plugin_data) -> tuple[ModeKeys, int]:  # noqa: ANN001
        return mode_of(step, plugin_data)

    def read_tensors(self, check: object = "minimal") -> Iterator[TensorTuple]:
        return tensors_of(self.read_summaries(check=check))

    def read_summaries(self, check: object = "minimal") -> Iterator[tuple[int, pb.Summary]]:
        return summaries_of(self.read_events(check=check))

    def read_events(self, check: object = "minimal") -> Iterator[pb.Event]:
        while self.has_data():
            yield pb.Event.FromString(self.read_record(check=check))

    def has_data(self) -> bool:
        return self.position < self.max_pos
