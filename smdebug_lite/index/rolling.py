"""Rolling compaction: the chief worker's trial gets its manifest while it is being written.

Compacting only at hook close leaves a running job, and a job that was killed, with one index
file to read per step and worker. Instead, each time the chief worker's writer finishes a block
of `CHUNK_STEPS` steps, a background thread extends the manifest by the whole blocks every
writing worker has gone past (`compact_trial(whole_chunks=True)`): the same chunks compacting
the finished trial once would write, so the close-time compaction only adds the tail. A reader
opening the trial at any time reads at most one block per worker from per-step files.

The writer announces its steps through `trial_listeners`; the package root registers
`step_written` and `writing_ended` there. The thread runs in the writer's process (the writer
process, or the training process for the thread writer), one compaction at a time per trial,
never holding up a step: a step that comes while one runs only asks for another afterwards.
Each compaction trusts the manifest the previous one wrote (its chunks are not read again),
so a long run costs one read of each index file, as a compaction at close would.
`SMDEBUG_COMPACT_ROLLING=0` (or `SMDEBUG_COMPACT=0`) turns it off. A failure is logged once
and stops rolling for that trial: the close-time compaction still runs.
"""

from __future__ import annotations

import threading
import time

from smdebug_lite.env_settings import env_bool, env_int
from smdebug_lite.index import manifest as mf
from smdebug_lite.index.compact import DEFAULT_MIN_FILES, CompactionResult, compact_trial
from smdebug_lite.logger import get_logger

logger = get_logger(__name__)

# After a compaction that stopped short of the block the chief has finished (another worker
# behind it, or an S3 upload not yet there), the next one waits at least this long.
RETRY_AFTER_S = 5.0
# How long a finishing writer waits for a compaction in progress.
END_WAIT_S = 600.0


class RollingCompactor:
    """Keeps one trial's manifest up to the last whole block its workers have written."""

    def __init__(self, out_dir: str, chunk_steps: int = mf.CHUNK_STEPS,
                 min_files: int = DEFAULT_MIN_FILES) -> None:
        self.out_dir = out_dir
        self.chunk_steps = chunk_steps
        self.min_files = min_files
        self.results: list[CompactionResult] = []  # one per compaction that ran
        self.failed: str | None = None  # why rolling stopped, once it has
        self._covered = 0  # steps before this are in the manifest
        self._wanted = 0  # the chief has written the steps before this (whole blocks)
        self._retry_at = 0.0
        self._trusted: mf.Manifest | None = None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._running = False  # a compaction is in progress or asked for
        self._ended = False
        self._thread: threading.Thread | None = None

    def step_written(self, step: int) -> None:
        """The chief's writer has written `step`: a block it completes is compacted next."""
        blocks_end = (step + 1) // self.chunk_steps * self.chunk_steps
        if blocks_end <= self._covered or self.failed is not None:
            return  # (the common case, without the lock)
        with self._lock:
            self._wanted = max(self._wanted, blocks_end)
            if self._running or self._ended or time.monotonic() < self._retry_at:
                return
            self._running = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="smdebug-lite-compaction")
                self._thread.start()
            else:
                self._wake.notify()

    def end(self, timeout: float = END_WAIT_S) -> None:
        """Stop, after a last compaction of the whole blocks not yet covered (a writer whose
        training process is gone ends this way, with no close-time compaction after it).
        Waits for it, and for one in progress."""
        with self._lock:
            self._ended = True
            if self._wanted > self._covered and self.failed is None and not self._running:
                self._running = True
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name="smdebug-lite-compaction")
                    self._thread.start()
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                logger.warning("The compaction of %s is still running after %.0f s; the writer "
                               "finishes without waiting for it", self.out_dir, timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._running and not self._ended:
                    self._wake.wait()
                if self._ended and not self._running:
                    return
            try:
                self._compact()
            except Exception as e:  # the trial stays readable; close compacts it again
                self.failed = f"{type(e).__name__}: {e}"
                logger.warning("Stopped compacting the index of %s as it is written: %s "
                               "(it is compacted when the hook closes)", self.out_dir,
                               self.failed)
            with self._lock:
                self._running = False
                if self.failed is not None:
                    return
                if self._wanted > self._covered:
                    # Short of what the chief has written: try again, not at once.
                    self._retry_at = time.monotonic() + RETRY_AFTER_S

    def _compact(self) -> None:
        result = compact_trial(self.out_dir, min_files=self.min_files,
                               chunk_steps=self.chunk_steps, whole_chunks=True,
                               trusted=self._trusted)
        self.results.append(result)
        self._trusted = result.manifest
        if result.last_step is not None:
            self._covered = max(self._covered, result.last_step + 1)
        if result.chunks_written:
            logger.debug("Compacted the index as it is written: %s", result)


_compactors: dict[str, RollingCompactor | None] = {}  # None: rolling is off for it
_registry_lock = threading.Lock()
_UNSET = object()


def step_written(out_dir: str, step: int) -> None:
    """`trial_listeners` step listener: the chief's writer of `out_dir` wrote `step`."""
    compactor = _compactors.get(out_dir, _UNSET)
    if compactor is _UNSET:
        with _registry_lock:
            compactor = _compactors.get(out_dir, _UNSET)
            if compactor is _UNSET:
                compactor = _compactors[out_dir] = _new_compactor(out_dir)
    if compactor is not None:
        compactor.step_written(step)  # type: ignore[union-attr]


def writing_ended(out_dir: str) -> None:
    """`trial_listeners` end listener: waits for the trial's compaction in progress."""
    with _registry_lock:
        compactor = _compactors.pop(out_dir, None)
    if compactor is not None:
        compactor.end()


def compactor_of(out_dir: str) -> RollingCompactor | None:
    """The compactor of a trial this process's writer is writing (None: none, or off)."""
    return _compactors.get(out_dir)


def _new_compactor(out_dir: str) -> RollingCompactor | None:
    if not (env_bool("SMDEBUG_COMPACT", True) and env_bool("SMDEBUG_COMPACT_ROLLING", True)):
        return None
    return RollingCompactor(out_dir,
                            min_files=env_int("SMDEBUG_COMPACT_MIN_FILES", DEFAULT_MIN_FILES))
