"""``smdebug.core.tfevent.index_file_writer``: the index file of one (step, worker).

The document is the layout of ``smdebug_lite.format.index_file``: ``meta`` (mode name, mode step,
event file relative to the trial), ``tensor_payload`` (where each record is) and
``shape_payload``. It is written whole when the writer is closed, after the event file, so a
reader that finds an index finds the records it points to.
"""

from __future__ import annotations

import json

from smdebug_lite.compat.core.access_layer.file import TSAccessFile
from smdebug_lite.compat.core.access_layer.s3 import TSAccessS3
from smdebug_lite.compat.core.locations import TensorLocation, TensorShape
from smdebug_lite.compat.core.utils import is_s3
from smdebug_lite.exceptions import SMDebugValueError


def _mode_name(mode: object) -> object:
    """Index files store the mode's name ('TRAIN'); accept a ModeKeys, a name or 'ModeKeys.X'."""
    name = getattr(mode, "name", None)
    if name is not None:
        return name
    return str(mode).split(".")[-1] if mode is not None else mode


class IndexWriter:
    """Collects index entries for `file_path` (local or ``s3://``) and writes them on close."""

    def __init__(self, file_path: str) -> None:
        self.file_path = file_path
        self.index_payload: list[dict] = []
        self.index_meta: dict = {}
        self.shape_payload: list[dict] = []
        self.writer: TSAccessFile | TSAccessS3 | None = None

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _init_writer(self) -> None:
        on_s3, bucket, key = is_s3(self.file_path)
        if on_s3:
            self.writer = TSAccessS3(str(bucket), str(key), binary=False)
        else:
            self.writer = TSAccessFile(self.file_path, "w")

    def add_index(self, tensorlocation: TensorLocation, entry: dict | None = None) -> None:
        """Record where a tensor is. `entry` replaces ``tensorlocation.to_dict()`` when given
        (smdebug-lite's entries add a CRC32C and where the raw bytes are)."""
        if not self.writer:
            self._init_writer()
        if not self.index_meta or "event_file_name" not in self.index_meta:
            self.index_meta = {
                "mode": _mode_name(tensorlocation.mode),
                "mode_step": tensorlocation.mode_step,
                "event_file_name": tensorlocation.event_file_name,
            }
        self.index_payload.append(entry if entry is not None else tensorlocation.to_dict())

    def add_shape(self, tensorshape: TensorShape) -> None:
        if not self.writer:
            self._init_writer()
        if not self.index_meta:
            self.index_meta = {
                "mode": _mode_name(tensorshape.mode),
                "mode_step": tensorshape.mode_step,
            }
        self.shape_payload.append(tensorshape.to_dict())

    def flush(self) -> None:
        """Write the collected entries as the file's document (once: a file holds one)."""
        if not self.writer:
            raise SMDebugValueError(f"{self.file_path}: nothing was added to the index writer")
        if not self.index_meta:
            raise SMDebugValueError(f"{self.file_path}: cannot write an index without its meta")
        if not self.index_payload and not self.shape_payload:
            raise SMDebugValueError(f"{self.file_path}: cannot write an index without entries")
        index = Index(
            meta=self.index_meta,
            tensor_payload=self.index_payload,
            shape_payload=self.shape_payload,
        )
        self.writer.write(index.to_json())
        self.writer.flush()
        self.index_meta = {}
        self.index_payload = []
        self.shape_payload = []

    def close(self) -> None:
        """Write what is pending and put the file in place."""
        if self.writer is not None:
            if self.index_meta and (self.index_payload or self.shape_payload):
                self.flush()
            self.writer.close()
            self.writer = None


class Index:
    def __init__(
        self,
        meta: dict | None = None,
        tensor_payload: list | None = None,
        shape_payload: list | None = None,
    ) -> None:
        self.meta = meta
        self.tensor_payload = tensor_payload
        self.shape_payload = shape_payload

    def to_json(self) -> str:
        return json.dumps(
            {
                "meta": self.meta,
                "tensor_payload": self.tensor_payload,
                "shape_payload": self.shape_payload,
            }
        )


class EventWithIndex:
    """An event to write plus what its index entry needs."""

    def __init__(self, event: object, tensorname: str, mode: object, mode_step: int) -> None:
        self.event = event
        self.tensorname = tensorname
        self.mode = mode
        self.mode_step = mode_step

    def get_mode(self) -> object:
        return _mode_name(self.mode)
