"""TensorBoard export: histogram and scalar summaries in standard TF event files.

Layout as smdebug: ``<tb_dir>/<MODE>/<STEP12>_<pid>_<hostname>.tfevents``, one file per saved
step and mode, each starting with a ``file_version`` record, framed with real payload CRCs (unlike
the tensor files under ``events/``). Histograms use TensorFlow's default bucket edges
(±1e-12·1.1^k up to 1e20, plus 0), so TensorBoard draws them as it would TF's own.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np

from smdebug_lite.config.arguments import parse_mode
from smdebug_lite.format.locations import tensorboard_file_name
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.records import encode_record
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer.write_failed import WriteFailed

logger = get_logger(__name__)

FILE_VERSION = "brain.Event:2"
_TAG_CLEAN = re.compile(r"[^-/\w\.]")


def clean_tag(tag: str) -> str:
    """TensorBoard's tag alphabet: other characters become '_', leading '/' are dropped."""
    return _TAG_CLEAN.sub("_", tag).lstrip("/")


def _default_bucket_limits() -> np.ndarray:
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos_arr = np.array(pos + [np.finfo(np.float64).max], dtype=np.float64)
    return np.concatenate([-pos_arr[::-1], [0.0], pos_arr])


BUCKET_LIMITS = _default_bucket_limits()


def histogram_proto(values: np.ndarray) -> pb.HistogramProto | None:
    """TF's bucketing (a value lands in the first bucket whose upper limit exceeds it), trimmed
    to the populated range plus one empty bucket on the left so its lower edge is known.
    Non-finite values are left out; None when no finite value remains."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    x = x[np.isfinite(x)]
    if not x.size:
        return None
    idx = np.searchsorted(BUCKET_LIMITS, x, side="right")
    idx = np.minimum(idx, len(BUCKET_LIMITS) - 1)
    counts = np.bincount(idx, minlength=len(BUCKET_LIMITS))
    nz = np.flatnonzero(counts)
    lo, hi = max(int(nz[0]) - 1, 0), int(nz[-1])
    return pb.HistogramProto(
        min=float(x.min()),
        max=float(x.max()),
        num=float(x.size),
        sum=float(x.sum()),
        sum_squares=float(np.dot(x, x)),
        bucket_limit=BUCKET_LIMITS[lo : hi + 1].tolist(),
        bucket=counts[lo : hi + 1].astype(np.float64).tolist(),
    )


class TensorBoardWriter:
    """Writes summaries for the current step of each mode; `flush_step` closes the step's files."""

    def __init__(self, tb_dir: str) -> None:
        self.tb_dir = tb_dir
        self._open: dict[tuple[ModeKeys, int], object] = {}
        self._written: set[str] = set()
        self._closed = False
        self._failed = False  # a write raised WriteFailed: the hook has reported the fault

    def _file(self, step: int, mode: ModeKeys):
        key = (mode, step)
        f = self._open.get(key)
        if f is None:
            path = tensorboard_file_name(self.tb_dir, mode.name, step)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            again = path in self._written  # a late value for a step already flushed: append
            f = open(path, "ab" if again else "wb")
            if not again:
                header = pb.Event(wall_time=time.time(), step=step, file_version=FILE_VERSION)
                f.write(encode_record(header.SerializeToString(), real_crc=True))
                self._written.add(path)
            self._open[key] = f
        return f

    def _write(self, value: pb.Summary.Value, step: int, mode) -> None:
        if self._closed:
            return
        mode = parse_mode(mode)
        event = pb.Event(wall_time=time.time(), step=int(step), summary=pb.Summary(value=[value]))
        try:
            self._file(int(step), mode).write(encode_record(event.SerializeToString(), real_crc=True))
        except OSError as e:  # (a full disk: the hook stops saving, see `WriteFailed`)
            self._failed = True
            raise WriteFailed(f"writing TensorBoard events to {self.tb_dir} failed: "
                              f"{type(e).__name__}: {e}") from e

    def add_scalar(self, tag: str, value: float, step: int, mode=ModeKeys.GLOBAL) -> None:
        self._write(pb.Summary.Value(tag=clean_tag(tag), simple_value=float(value)), step, mode)

    def add_histogram(self, tag: str, values: np.ndarray, step: int, mode=ModeKeys.GLOBAL) -> None:
        arr = np.asarray(values)
        if arr.dtype.kind not in "biuf" or not arr.size:
            return
        histo = histogram_proto(arr)
        if histo is None:
            return
        self._write(pb.Summary.Value(tag=clean_tag(tag), histo=histo), step, mode)

    def flush_step(self) -> None:
        """Close the files of the step(s) written so far (one file per saved step, as smdebug)."""
        files, self._open = self._open, {}
        for f in files.values():
            try:
                f.close()
            except OSError as e:
                # After a failed write the hook has said why it stopped; this is the same fault.
                log = logger.warning if self._failed else logger.error
                log("Could not write TensorBoard file %s: %s", getattr(f, "name", "?"), e)

    def close(self) -> None:
        self.flush_step()
        self._closed = True


__all__ = ["BUCKET_LIMITS", "FILE_VERSION", "TensorBoardWriter", "clean_tag", "histogram_proto"]
