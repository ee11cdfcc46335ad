"""An out_dir being written by one worker, on a background thread of this process.

Encoding and file I/O (`StepFileWriter`) run on one background thread so training only pays for
handing over arrays. The queue is bounded by bytes: when the writer falls behind, `submit` waits
(training slows down rather than memory growing without bound) and the wait is reported. The
writer thread's Python competes with training for the GIL; where it can, a hook writes through
the writer process instead (`writer.process`), and this class is the fallback.
"""

from __future__ import annotations

import queue
import threading
import time

from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage
from smdebug_lite.writer.pending_step import PendingStep
from smdebug_lite.writer.protocol import on_sagemaker
from smdebug_lite.writer.step_file_writer import StepFileWriter
from smdebug_lite.writer.write_failed import WriteFailed
from smdebug_lite.writer.writer_waits import DEFAULT_MAX_PENDING_BYTES, WriterWaits

logger = get_logger(__name__)

_STOP = object()


class ThreadTrialWriter:
    """Writes one worker's files under `out_dir` (a path or an s3:// URI) from a thread: the
    fallback `TrialWriter` where the writer process cannot run."""

    def __init__(
        self,
        out_dir: str,
        worker: str = "worker_0",
        *,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        staging_dir: str | None = None,
        resumed: bool = False,
        previous_staging: str | None = None,
        chief: bool = False,
        storage: Storage | None = None,
    ) -> None:
        """`chief`: the chief worker's writer; `storage`: the out_dir's, if the caller holds it
        (see `StepFileWriter`)."""
        self.out_dir = out_dir
        self.worker = worker
        self.chief = chief
        self.max_pending_bytes = max_pending_bytes
        # (resumed: it takes over from a writer process that died; see `StepFileWriter`)
        self.files = StepFileWriter(out_dir, worker, staging_dir, resumed,
                                    previous_staging=previous_staging, chief=chief, storage=storage)
        self.uploader = self.files.uploader
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # C-level: cheap to put from training
        self._cond = threading.Condition(threading.Lock())  # guards _pending; submit waits on it
        self._pending = 0
        self.error: BaseException | None = None
        self.waits = WriterWaits(max_pending_bytes)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="smdebug-lite-writer", daemon=True)
        self._thread.start()

    # -- training-thread side ------------------------------------------------------------

    def new_step(self, step: int, mode, mode_step: int) -> PendingStep:
        return PendingStep(step, self.worker, mode, mode_step)

    def submit(self, step: PendingStep) -> None:
        """Hand a finished step to the background thread; waits only if the queue is full."""
        if not len(step):
            return
        self._raise_if_failed()
        size = step.nbytes
        with self._cond:
            if self._pending and self._pending + size > self.max_pending_bytes:
                start = time.perf_counter()
                while self._pending and self._pending + size > self.max_pending_bytes:
                    self._cond.wait(timeout=1.0)
                    if self.error is not None:
                        break
                self.waits.add(time.perf_counter() - start, self._pending)
            self._pending += size
        self._queue.put(("step", step, size))

    def write_collections(self, json_text: str) -> None:
        self._queue.put(("collections", json_text, 0))

    def flush(self) -> None:
        """Block until everything submitted so far is written (and uploaded, for S3)."""
        done = threading.Event()
        self._queue.put(("flush", done, 0))
        while not done.wait(timeout=0.5):
            if not self._thread.is_alive():
                break
        self.files.wait_uploads()
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
        if mark_training_end is None:
            mark_training_end = not on_sagemaker()
        try:
            self.files.finish(mark_training_end and self.error is None)
        except BaseException as e:
            self.error = self.error or e
        if self.error is None:
            self.error = self.files.upload_error
        self.waits.log_total()
        self._raise_if_failed()

    @property
    def total_wait_s(self) -> float:
        return self.waits.total_s

    def _raise_if_failed(self) -> None:
        if self.error is None and self.files.upload_error is not None:
            self.error = self.files.upload_error  # reported to training on the next step, not at close
        if self.error is not None:
            raise WriteFailed(f"writing to {self.out_dir} failed: {self.error}") from self.error

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
                        self.files.write_collections(item)
                if kind == "flush":
                    item.set()
            except BaseException as e:  # reported to the training thread on its next call
                self.error = e
                # The hook reports it loudly, once, when it sees the error (`WriteFailed`).
                logger.warning("smdebug-lite writer failed on %s: %s", self.out_dir, e)
            finally:
                if size:
                    with self._cond:
                        self._pending -= size
                        self._cond.notify_all()

    def _write_step(self, sw: PendingStep) -> None:
        self.files.write_step(sw)
        if sw.on_written is not None:  # the arrays are no longer needed
            sw.on_written()
