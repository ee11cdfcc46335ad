"""An out_dir being written by one worker: steps, the collections file and the end marker.

Encoding and file I/O run on one background thread so training only pays for handing over
arrays. The queue is bounded by bytes: when the writer falls behind, `submit` waits (training
slows down rather than memory growing without bound) and the wait is reported. For `s3://`
out_dirs files are staged in a local directory and uploaded by `S3Uploader`.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import time

from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.locations import END_OF_JOB_FILE, collections_file_name
from smdebug_lite.logger import get_logger
from smdebug_lite.storage import LocalStorage, Storage, is_s3_path, open_storage
from smdebug_lite.writer.step_writer import StepWriter

logger = get_logger(__name__)

DEFAULT_MAX_PENDING_BYTES = int(os.environ.get("SMDEBUG_WRITER_MAX_PENDING_MB", "512")) << 20
_STOP = object()


def on_sagemaker() -> bool:
    return bool(os.environ.get("TRAINING_JOB_NAME"))


class TrialWriter:
    """Writes one worker's files under `out_dir` (a path or an s3:// URI)."""

    def __init__(
        self,
        out_dir: str,
        worker: str = "worker_0",
        *,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        staging_dir: str | None = None,
    ) -> None:
        self.out_dir = out_dir
        self.worker = worker
        self.max_pending_bytes = max_pending_bytes
        self.uploader = None
        if is_s3_path(out_dir):
            from smdebug_lite.writer.s3_uploader import S3Uploader

            staging = staging_dir or tempfile.mkdtemp(prefix="smdebug-lite-staging-")
            self.storage: Storage = LocalStorage(staging)
            self.uploader = S3Uploader(staging, out_dir)
            self.target: Storage = open_storage(out_dir)
        else:
            self.storage = LocalStorage(out_dir)
            self.target = self.storage
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # C-level: cheap to put from training
        self._cond = threading.Condition(threading.Lock())  # guards _pending; submit waits on it
        self._pending = 0
        self._written_steps: set[int] = set()
        self.error: BaseException | None = None
        self.total_wait_s = 0.0
        self._last_wait_report = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="smdebug-lite-writer", daemon=True)
        self._thread.start()

    # -- training-thread side ------------------------------------------------------------

    def new_step(self, step: int, mode, mode_step: int) -> StepWriter:
        return StepWriter(step, self.worker, mode, mode_step)

    def submit(self, step_writer: StepWriter) -> None:
        """Hand a finished step to the background thread; waits only if the queue is full."""
        if not len(step_writer):
            return
        self._raise_if_failed()
        size = step_writer.nbytes
        with self._cond:
            if self._pending and self._pending + size > self.max_pending_bytes:
                start = time.perf_counter()
                while self._pending and self._pending + size > self.max_pending_bytes:
                    self._cond.wait(timeout=1.0)
                    if self.error is not None:
                        break
                self._report_wait(time.perf_counter() - start)
            self._pending += size
        self._queue.put(("step", step_writer, size))

    def write_collections(self, json_text: str) -> None:
        self._queue.put(("collections", json_text, 0))

    def flush(self) -> None:
        """Block until everything submitted so far is written (and uploaded, for S3)."""
        done = threading.Event()
        self._queue.put(("flush", done, 0))
        while not done.wait(timeout=0.5):
            if not self._thread.is_alive():
                break
        if self.uploader is not None:
            self.uploader.wait()
            if self.uploader.error is not None and self.error is None:
                self.error = self.uploader.error
        self._raise_if_failed()

    def close(self, mark_training_end: bool | None = None) -> None:
        """Flush, then write `training_job_end.ts` (not on SageMaker, where the platform does)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
        finally:
            self._queue.put((_STOP, None, 0))
            self._thread.join(timeout=600)
        if self.uploader is not None:
            self.uploader.close()
            if self.uploader.error is not None and self.error is None:
                self.error = self.uploader.error
        if mark_training_end is None:
            mark_training_end = not on_sagemaker()
        if mark_training_end and self.error is None:
            self.target.write_atomic(END_OF_JOB_FILE, b"")
        if self.total_wait_s > 0:
            logger.info("Writer waits slowed training by %.2fs in total", self.total_wait_s)
        self._raise_if_failed()

    def _report_wait(self, waited: float) -> None:
        self.total_wait_s += waited
        now = time.monotonic()
        if waited > 0.05 and now - self._last_wait_report > 60:
            self._last_wait_report = now
            logger.warning(
                "The tensor writer fell behind: training waited %.2fs for %d MiB of queued "
                "tensors to be written (limit SMDEBUG_WRITER_MAX_PENDING_MB=%d). Saving fewer "
                "steps or tensors avoids this.", waited, self._pending >> 20,
                self.max_pending_bytes >> 20)

    def _raise_if_failed(self) -> None:
        if self.error is None and self.uploader is not None and self.uploader.error is not None:
            self.error = self.uploader.error  # reported to training on the next step, not at close
        if self.error is not None:
            raise RuntimeError(f"writing to {self.out_dir} failed: {self.error}") from self.error

    # -- background side -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            kind, item, size = self._queue.get()
            try:
                if kind is _STOP:
                    return
                if self.error is None:
                    if kind == "step":
                        self._write_step(item)
                    elif kind == "collections":
                        rel = collections_file_name(self.worker)
                        self.storage.write_atomic(rel, item.encode("utf-8"))
                        self._uploaded(rel)
                if kind == "flush":
                    item.set()
            except BaseException as e:  # reported to the training thread on its next call
                self.error = e
                logger.error("smdebug-lite writer failed on %s: %s", self.out_dir, e)
            finally:
                if size:
                    with self._cond:
                        self._pending -= size
                        self._cond.notify_all()

    def _write_step(self, sw: StepWriter) -> None:
        old_event = b""
        old_doc = None
        if sw.step in self._written_steps:
            # A second writer for an already written step appends: smdebug re-created the
            # writer and its new files replaced the old ones, losing data.
            old_doc, old_event = self._read_existing(sw)
        chunks, doc = sw.encode(base_offset=len(old_event))
        if old_doc is not None:
            doc.tensors[:0] = old_doc.tensors
            doc.shapes[:0] = old_doc.shapes
            doc.mode, doc.mode_step = old_doc.mode, old_doc.mode_step
            chunks.insert(0, old_event)
        # Event file first: a reader that finds the index must find the records it points to.
        if doc.tensors:
            self.storage.write_atomic(sw.event_file_name, chunks)
            self._uploaded(sw.event_file_name)
        self.storage.write_atomic(sw.index_file_name, doc.to_json().encode("utf-8"))
        self._uploaded(sw.index_file_name)
        self._written_steps.add(sw.step)
        del chunks  # the last views of the arrays
        if sw.on_written is not None:
            sw.on_written()

    def _read_existing(self, sw: StepWriter):
        if self.uploader is not None:
            self.uploader.wait()
        try:
            text = self.target.read(sw.index_file_name)
        except FileNotFoundError:
            return None, b""
        doc = parse_index(text, sw.index_file_name)
        event = self.target.read(sw.event_file_name) if doc.tensors else b""
        return doc, event

    def _uploaded(self, rel: str) -> None:
        if self.uploader is not None:
            self.uploader.enqueue(rel)
