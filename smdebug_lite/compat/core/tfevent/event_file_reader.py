"""``smdebug.core.tfevent.event_file_reader``: the tensors, summaries and events of a file.

Decoding is ``smdebug_lite.format.tensor_codec``'s, so every dtype our writers store comes back
(smdebug read INT8 as uint8 and could not read int16, uint16/32/64, complex64 or bfloat16).
Values are writable copies, as smdebug returned them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from smdebug_lite.compat.core.tfrecord.record_reader import RecordReader
from smdebug_lite.exceptions import SMDebugTypeError, SMDebugValueError
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.tensor_codec import PROTO_TO_NUMPY, array_from_tensor_proto
from smdebug_lite.modes import MODE_BY_VALUE, ModeKeys

MODE_PLUGIN_NAME = "mode"
MODE_STEP_PLUGIN_NAME = "mode_step"
Event = pb.Event

TensorTuple = tuple[str, int, np.ndarray, ModeKeys, int]


def as_dtype(t: int) -> type | np.dtype:
    """The numpy dtype of a TensorProto dtype code."""
    if t == pb.DT_STRING:
        return str
    dtype = PROTO_TO_NUMPY.get(t)
    if dtype is None:
        raise SMDebugTypeError(f"tensor proto dtype {t} is not supported")
    return dtype


def get_tensor_data(tensor: pb.TensorProto) -> np.ndarray:
    """The array a TensorProto holds (a writable copy)."""
    try:
        arr = array_from_tensor_proto(tensor)
    except ValueError as e:
        raise SMDebugValueError(f"cannot decode tensor proto: {e}") from None
    return arr.copy() if not arr.flags.writeable else arr


def mode_of(
    step: int, plugin_data: Iterable[pb.SummaryMetadata.PluginData]
) -> tuple[ModeKeys, int]:
    """(mode, mode step) from a summary value's plugin data; GLOBAL and the step without it."""
    mode, mode_step = ModeKeys.GLOBAL, step
    for metadata in plugin_data:
        if metadata.plugin_name == MODE_STEP_PLUGIN_NAME:
            mode_step = int(metadata.content)
        elif metadata.plugin_name == MODE_PLUGIN_NAME:
            value = int(metadata.content)
            if value not in MODE_BY_VALUE:
                raise SMDebugValueError(
                    f"plugin data mode={metadata.content!r} is not a mode value"
                )
            mode = MODE_BY_VALUE[value]
    return mode, mode_step


def tensors_of(summaries: Iterable[tuple[int, pb.Summary]]) -> Iterator[TensorTuple]:
    """(name, step, value, mode, mode step) of every value; a non-tensor value is an error."""
    for step, summary in summaries:
        for v in summary.value:
            kind = v.WhichOneof("value")
            if kind != "tensor":
                raise SMDebugValueError(
                    f"summary value {v.tag!r} at step {step} is {kind!r}, not 'tensor'"
                )
            mode, mode_step = mode_of(step, v.metadata.plugin_data)
            yield v.tag, step, get_tensor_data(v.tensor), mode, mode_step


def summaries_of(events: Iterable[pb.Event]) -> Iterator[tuple[int, pb.Summary]]:
    for event in events:
        if event.HasField("summary"):
            yield event.step, event.summary


class EventsReader:
    """The Event protos of one file, in order."""

    def __init__(self, filename: str) -> None:
        self._filename = filename
        self._tfrecord_reader = RecordReader(filename)

    def __exit__(self, *exc: object) -> None:
        self._tfrecord_reader.close()

    def read_events(self, check: object = "minimal") -> Iterator[pb.Event]:
        while self._tfrecord_reader.has_data():
            yield pb.Event.FromString(self._tfrecord_reader.read_record(check=check))


class EventSource:
    """Tensors and summaries of what a subclass's ``read_events`` yields."""

    def read_events(self, check: object = "minimal") -> Iterator[pb.Event]:
        raise NotImplementedError

    def read_tensors(self, check: object = "minimal") -> Iterator[TensorTuple]:
        return tensors_of(self.read_summaries(check=check))

    def read_summaries(self, check: object = "minimal") -> Iterator[tuple[int, pb.Summary]]:
        return summaries_of(self.read_events(check=check))


class EventFileReader(EventSource):
    """Tensors, summaries and events of one event file (local or ``s3://``)."""

    def __init__(self, fname: str) -> None:
        self._filename = fname
        self._ev_reader = EventsReader(fname)

    def __exit__(self, *exc: object) -> None:
        self._ev_reader.__exit__(*exc)

    def read_events(self, check: object = "minimal") -> Iterator[pb.Event]:
        return self._ev_reader.read_events(check=check)
