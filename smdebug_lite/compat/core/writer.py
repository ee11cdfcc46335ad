"""``smdebug.core.writer``: ``FileWriter``, one step of one worker written as smdebug writes it.

``wtype="events"`` writes ``events/<step>/<step>_<worker>.tfevents`` and its index file under
the trial; ``wtype="tensorboard"`` writes ``<trial_dir>/<MODE>/<step>_<worker>.tfevents`` with
no index. Tensors are encoded by ``smdebug_lite.format.tensor_codec`` (the hooks' encoder), so
the files read back through smdebug-lite's trials (with CRC checks) and through smdebug 1.0.34.
Files appear when the writer is closed: the event file first, then the index.
"""

from __future__ import annotations

import time
from enum import Enum

import numpy as np

from smdebug_lite.compat.core.locations import (
    IndexFileLocationUtils,
    TensorboardFileLocation,
    TensorFileLocation,
    TensorShape,
)
from smdebug_lite.compat.core.tfevent.event_file_writer import EventFileWriter
from smdebug_lite.compat.core.tfevent.index_file_writer import IndexWriter
from smdebug_lite.compat.core.utils import make_numpy_array
from smdebug_lite.exceptions import SMDebugRuntimeError, SMDebugValueError
from smdebug_lite.format.inline_value import inline_for_record
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.tensor_codec import encode_tensor_record
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ALLOWED_MODE_NAMES, ModeKeys
from smdebug_lite.writer.tensorboard import histogram_proto

logger = get_logger(__name__)


def _check_mode(mode: object) -> ModeKeys:
    """None is GLOBAL; a ModeKeys (ours, or any enum with the same member names) is kept."""
    if mode is None:
        return ModeKeys.GLOBAL
    if isinstance(mode, ModeKeys):
        return mode
    if isinstance(mode, Enum) and mode.name in ALLOWED_MODE_NAMES:
        return ModeKeys[mode.name]
    raise SMDebugValueError(
        f"mode={mode!r}: mode can be one of "
        + ", ".join(f"ModeKeys.{n}" for n in ALLOWED_MODE_NAMES)
    )


class FileWriter:
    """Writes the tensors of `step` for `worker` under `trial_dir` (local or ``s3://``)."""

    def __init__(
        self,
        trial_dir: str,
        worker: str,
        step: int = 0,
        wtype: str = "events",
        mode: ModeKeys = ModeKeys.GLOBAL,
        max_queue: int = 10,
        flush_secs: float = 120,
        verbose: bool = False,
        write_checksum: bool = False,
    ) -> None:
        self.trial_dir = trial_dir
        self.worker = worker
        self.step = step
        self.wtype = wtype
        self.mode = mode
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.verbose = verbose
        self.write_checksum = write_checksum
        self._proto_writer: EventFileWriter | None = None
        if wtype == "events":
            location = TensorFileLocation(step_num=step, worker_name=worker)
            self.event_file_path = location.get_file_location(trial_dir=trial_dir)
            index_path = IndexFileLocationUtils.get_index_key_for_step(trial_dir, step, worker)
            self._index_writer: IndexWriter | None = IndexWriter(index_path)
        elif wtype == "tensorboard":
            location = TensorboardFileLocation(
                step_num=step, worker_name=worker, mode=_check_mode(mode)
            )
            self.event_file_path = location.get_file_location(base_dir=trial_dir)
            self._index_writer = None
        else:
            raise SMDebugValueError(
                f"Writer type not supported {wtype} (expected 'events' or 'tensorboard')"
            )

    def __enter__(self) -> FileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def index_writer(self) -> IndexWriter | None:
        return self._index_writer

    @index_writer.setter
    def index_writer(self, iw: IndexWriter | None) -> None:
        self._index_writer = iw

    @property
    def proto_writer(self) -> EventFileWriter:
        """The event file's writer, created (and the file begun) on first use."""
        if self._proto_writer is None:
            self._proto_writer = EventFileWriter(
                path=self.event_file_path,
                index_writer=self.index_writer,
                max_queue=self.max_queue,
                flush_secs=self.flush_secs,
                verbose=self.verbose,
                write_checksum=self.write_checksum,
            )
        return self._proto_writer

    def write_tensor(
        self,
        tdata: object,
        tname: str,
        write_index: bool = True,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        timestamp: float | None = None,
    ) -> None:
        """Append one tensor (an ndarray, scalar, list or tuple) saved at this writer's step."""
        mode, mode_step = self._check_mode_step(mode, mode_step, self.step)
        value = make_numpy_array(tdata)
        rec = encode_tensor_record(
            tname, value, self.step, mode.value, mode_step, timestamp or time.time()
        )
        self.proto_writer.write_tensor_record(rec, tname, mode, mode_step, write_index,
                                              inline_for_record(value, rec.stored_dtype,
                                                                rec.orig_dtype))

    def write_graph(self, graph: object) -> None:
        self.proto_writer.write_graph(graph)

    def write_summary(
        self, summ: pb.Summary, global_step: int, timestamp: float | None = None
    ) -> None:
        self.proto_writer.write_summary(summ, global_step, timestamp=timestamp)

    def write_scalar_summary(
        self, name: str, value: float, global_step: int, timestamp: float | None = None
    ) -> None:
        summary = pb.Summary(value=[pb.Summary.Value(tag=name, simple_value=float(value))])
        self.proto_writer.write_summary(summary, global_step, timestamp=timestamp)

    def write_histogram_summary(
        self, tdata: np.ndarray, tname: str, global_step: int, bins: object = "default"
    ) -> None:
        """A histogram with TensorFlow's default buckets (the only `bins` supported)."""
        if bins != "default":
            raise SMDebugValueError(
                f"bins={bins!r}: only TensorFlow's default buckets ('default') are supported"
            )
        histo = histogram_proto(np.asarray(tdata))
        if histo is None:
            logger.warning(
                "Unable to write histogram %s at %s: no finite values", tname, global_step
            )
            return
        summary = pb.Summary(value=[pb.Summary.Value(tag=tname, histo=histo)])
        self.proto_writer.write_summary(summary, global_step)

    def write_shape(
        self,
        name: str,
        shape: tuple[int, ...],
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        original_name: str | None = None,
    ) -> None:
        """Record only the shape of a tensor (an index ``shape_payload`` entry)."""
        if self.index_writer is None:
            raise SMDebugValueError("write_shape needs an events writer (wtype='events')")
        mode, mode_step = self._check_mode_step(mode, mode_step, self.step)
        self.index_writer.add_shape(
            TensorShape(name, mode.name, mode_step, shape, original_name=original_name)
        )

    def close(self) -> None:
        """Put the event file in place, then the index file."""
        if self._proto_writer is not None:
            self._proto_writer.close()
        if self.index_writer is not None:
            self.index_writer.close()

    def flush(self) -> None:
        """Push written records to the (temporary) event file; the index is written on close."""
        if self._proto_writer is not None:
            self._proto_writer.flush()

    def name(self) -> str:
        if self._proto_writer is not None:
            return self._proto_writer.name()
        raise SMDebugRuntimeError(
            "Writer hasn't been initialized yet. It will be initialized when the first tensor "
            "or summary is written."
        )

    @staticmethod
    def _check_mode_step(
        mode: object, mode_step: int | None, global_step: int
    ) -> tuple[ModeKeys, int]:
        return _check_mode(mode), global_step if mode_step is None else mode_step
