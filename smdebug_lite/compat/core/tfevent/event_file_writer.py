"""``smdebug.core.tfevent.event_file_writer``: appends events to one event file.

Events are framed and appended as they are given (smdebug queued them to a thread, which its
``flush()`` then waited for; the file is only put in place on ``close()`` either way, so nothing
a reader sees differs). Tensor records come ready-made from ``smdebug_lite.format.tensor_codec``
and their index entries carry smdebug-lite's CRC32C and raw-bytes location.
"""

from __future__ import annotations

import struct
import time

from smdebug_lite.compat.core.locations import TensorLocation
from smdebug_lite.compat.core.tfevent.index_file_writer import EventWithIndex, IndexWriter
from smdebug_lite.compat.core.tfrecord.record_writer import RecordWriter
from smdebug_lite.compat.core.utils import get_relative_event_file_path
from smdebug_lite.exceptions import SMDebugRuntimeError, SMDebugTypeError
from smdebug_lite.format.crc import mask
from smdebug_lite.format.index_file import TensorEntry
from smdebug_lite.format.locations import parse_event_file_name
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.tensor_codec import EncodedRecord

Event = pb.Event
_U32 = struct.Struct("<I")


class EventFileWriter:
    """Writes the events of one file at `path` (local or ``s3://``); index entries go to
    `index_writer` when one is given."""

    def __init__(
        self,
        path: str,
        max_queue: int = 10,
        flush_secs: float = 120,
        index_writer: IndexWriter | None = None,
        verbose: bool = False,
        write_checksum: bool = False,
    ) -> None:
        self._path = path  # max_queue, flush_secs and verbose: nothing is queued (see above)
        self.write_checksum = write_checksum
        self.index_writer = index_writer
        self._records: RecordWriter | None = RecordWriter(path, write_checksum)
        self._relative: str | None = None
        self._worker: str | None = None

    def _index_location(
        self, tname: str, mode: object, mode_step: int, start: int, length: int
    ) -> TensorLocation:
        if self._relative is None:
            self._relative = get_relative_event_file_path(self._path)
            parsed = parse_event_file_name(self._relative)
            self._worker = parsed[1] if parsed else None
        return TensorLocation(
            tname,
            getattr(mode, "name", mode),
            mode_step,
            self._relative,
            start,
            length,
            self._worker or "",
        )

    def _writer(self) -> RecordWriter:
        if self._records is None:
            raise SMDebugRuntimeError(f"{self._path}: the event file writer is closed")
        return self._records

    def write_graph(self, graph: object) -> None:
        """Adds a graph (any protobuf message) as a ``graph_def`` event."""
        graph_def = graph.SerializeToString()  # type: ignore[attr-defined]
        self.write_event(pb.Event(graph_def=graph_def))

    def write_summary(self, summary: pb.Summary, step: int, timestamp: float | None = None) -> None:
        event = pb.Event(summary=summary, wall_time=timestamp or time.time(), step=step)
        self.write_event(event)

    def write_summary_with_index(
        self,
        summary: pb.Summary,
        step: int,
        tname: str,
        mode: object,
        mode_step: int,
        timestamp: float | None = None,
    ) -> None:
        event = pb.Event(summary=summary, wall_time=timestamp or time.time(), step=step)
        self.write_event(EventWithIndex(event, tname, mode, mode_step))

    def write_event(self, event: pb.Event | EventWithIndex) -> None:
        inner = event.event if isinstance(event, EventWithIndex) else event
        if not isinstance(inner, pb.Event):
            raise SMDebugTypeError(f"expected an Event proto, but got {type(inner)}")
        start, length = self._writer().write_record(inner.SerializeToString())
        if isinstance(event, EventWithIndex) and self.index_writer is not None:
            self.index_writer.add_index(
                self._index_location(
                    event.tensorname, event.get_mode(), event.mode_step, start, length
                )
            )

    def write_tensor_record(
        self, rec: EncodedRecord, tname: str, mode: object, mode_step: int, write_index: bool = True,
        inline: str | None = None,
    ) -> None:
        """Append a record made by ``tensor_codec.encode_tensor_record`` and index it (with
        `inline`, the value's text for its entry: ``inline_value.inline_for_record``)."""
        chunks = list(rec.chunks)
        if self.write_checksum:  # the encoder ends records with smdebug's constant footer
            chunks[-1] = bytes(chunks[-1][:-4]) + _U32.pack(mask(rec.crc))
        start, length = self._writer().write_framed(chunks)
        if write_index and self.index_writer is not None:
            entry = TensorEntry(
                tname,
                start,
                length,
                rec.crc,
                rec.stored_dtype,
                rec.shape,
                rec.content_offset,
                rec.orig_dtype,
                inline,
            )
            loc = self._index_location(tname, mode, mode_step, start, length)
            self.index_writer.add_index(loc, entry.to_json_dict())

    def flush(self) -> None:
        if self._records is not None:
            self._records.flush()

    def close(self) -> None:
        """Put the file in place (rename locally, upload on S3)."""
        if self._records is not None:
            self._records.close()
            self._records = None

    def name(self) -> str:
        return self._path


__all__ = ["Event", "EventFileWriter"]
