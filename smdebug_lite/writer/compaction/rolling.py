"""Rolling compaction: the chief worker's trial gets its manifest while it is being written.

Compacting only at hook close leaves a running job, and a job that was killed, with one index
file to read per step and worker. Instead, each time the chief worker's writer finishes a block
of `CHUNK_STEPS` steps, the manifest is extended by the whole blocks every
writing worker has gone past (`compact_trial(whole_chunks=True)`): the same chunks compacting
the finished trial once would write. When writing ends (the hook closes, or the training
process died and its writer process finished what it was handed), one last extension covers
the tail after the last whole block as well, so a killed job's trial is as compacted as a
closed one's and the close-time compaction finds nothing left. A reader opening a running
trial reads at most one block per worker from per-step files.

The chief's `StepFileWriter` calls `step_written` after each step it writes and
`writing_ended` as it finishes. A thread of the writer's process (the writer process,
or the training process for the thread writer) starts one compacting process at a time per
trial, never holding up a step: a step that comes while one runs only asks for another
afterwards. The compaction runs in its own process at the lowest CPU priority, so that it
neither holds the writer's interpreter lock nor takes a core training or writing needs: on a
machine whose cores they fill it waits, and the last extension covers what it has not
reached; that one runs at normal priority, since a closing hook waits for it. Each compaction
trusts the head the previous one wrote (its chunks are not read again), so a long run costs one
read of each index file, as a compaction at close would.
`SMDEBUG_COMPACT_ROLLING=0` (or `SMDEBUG_COMPACT=0`) turns it off. A failure is logged once
and stops rolling for that trial: the close-time compaction still runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import threading
import time

from smdebug_lite.config.env_settings import env_bool, env_int
from smdebug_lite.format import manifest as mf
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import open_storage
from smdebug_lite.writer.child_process import child_argv
from smdebug_lite.writer.compaction.compact import (
    DEFAULT_MIN_FILES,
    CompactionResult,
    compact_trial,
)

logger = get_logger(__name__)

# After a compaction that stopped short of the block the chief has finished (another worker
# behind it, or an S3 upload not yet there), the next one waits this long, doubling up to the
# maximum while nothing changes.
RETRY_AFTER_S = 5.0
MAX_RETRY_AFTER_S = 300.0
# How long a finishing writer waits for a compaction in progress.
END_WAIT_S = 600.0
COMPACTION_NICE = 19


class RollingCompactor:
    """Keeps one trial's manifest up to the last whole block its workers have written."""

    def __init__(self, out_dir: str, chunk_steps: int = mf.CHUNK_STEPS,
                 min_files: int = DEFAULT_MIN_FILES) -> None:
        self.out_dir = out_dir
        self.chunk_steps = chunk_steps
        self.min_files = min_files
        self.results: list[CompactionResult] = []  # one per compaction that ran
        self.failed: str | None = None  # why rolling stopped, once it has
        self._covered = 0  # the blocks of the steps before this are in the manifest
        self._wanted = 0  # the chief has written the steps before this (whole blocks)
        self._last_written = -1  # the chief's last step
        self._last_covered = -1  # the manifest's last step, as the last compaction left it
        self._retry_at = 0.0
        self._trusted_sha = ""  # SHA-256 of the head the last compaction left
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._running = False  # a compaction is in progress or asked for
        self._ended = False
        self._last_call = False  # one more compaction asked for by `end`
        self._thread: threading.Thread | None = None
        self._child: subprocess.Popen | None = None  # the compacting process running now
        self._stopped = False  # `end` gave up waiting and stopped it

    def step_written(self, step: int) -> None:
        """The chief's writer has written `step`: a block it completes is compacted next."""
        if step > self._last_written:
            self._last_written = step
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
        """Stop, after a last compaction of every step not yet covered, the tail after the last
        whole block included: a writer whose training process is gone ends this way, with no
        close-time compaction after it, and a killed job's trial is then as compacted as a
        closed one's. Waits for it, and for one in progress."""
        with self._lock:
            self._ended = True
            if self._last_written > self._last_covered and self.failed is None:
                self._last_call = True  # after the one in progress, if any
                if not self._running:
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
                # Stopped, not left running: the hook's close-time compaction comes next, and
                # two compactions of one trial must not write its manifest at the same time.
                with self._lock:
                    self._stopped = True
                    child = self._child
                if child is not None:
                    child.kill()
                thread.join(CHILD_STOP_WAIT_S)
                logger.warning("Stopped the compaction of %s after %.0f s; the writer finishes "
                               "without it (what it had not covered is read from the per-step "
                               "index files, or compacted at close)", self.out_dir, timeout)

    def _run(self) -> None:
        delay = RETRY_AFTER_S
        while True:
            with self._lock:
                while not self._running and not self._ended:
                    left = self._retry_at - time.monotonic() if self._wanted > self._covered \
                        else None
                    if left is not None and left <= 0:
                        self._running = True
                        break
                    self._wake.wait(left)
                if self._ended and not self._running:
                    return
                if self._ended:
                    self._last_call = False  # this one is it
                whole = not self._ended  # (the last one covers the tail too)
                wanted = self._wanted
            try:
                self._compact(whole)
            except Exception as e:  # the trial stays readable; close compacts it again
                self.failed = f"{type(e).__name__}: {e}"
                if self._stopped:  # (`end` says so)
                    return
                logger.warning("Stopped compacting the index of %s as it is written: %s "
                               "(it is compacted when the hook closes)", self.out_dir,
                               self.failed)
            with self._lock:
                self._running = False
                if self.failed is not None:
                    return
                if self._last_call:  # the writer ended while this one ran: once more
                    self._running = True
                    continue
                if self._wanted > self._covered:
                    if self._wanted > wanted:  # the chief finished more blocks meanwhile
                        delay = RETRY_AFTER_S
                        self._running = True
                        continue
                    # Short of what the chief has written (a worker behind it, files not yet
                    # on S3): try again later, waiting longer each time nothing changes.
                    self._retry_at = time.monotonic() + delay
                    delay = min(2 * delay, MAX_RETRY_AFTER_S)
                else:
                    delay = RETRY_AFTER_S

    def _compact(self, whole: bool) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError("stopped")
            proc = self._child = subprocess.Popen(
                child_argv(__name__, "compact_once", self.out_dir, str(self.chunk_steps),
                           str(self.min_files), self._trusted_sha,
                           "whole" if whole else "all"),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        try:
            out, _ = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError(f"the compacting process ran past {CHILD_TIMEOUT_S:.0f} s") from None
        finally:
            with self._lock:
                self._child = None
        lines = out.decode("utf-8", "replace").strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (IndexError, ValueError):
            raise RuntimeError(f"the compacting process exited with {proc.returncode} and no "
                               "answer") from None
        if "error" in answer:
            raise RuntimeError(answer["error"])
        self._trusted_sha = answer.pop("head_sha256")
        result = CompactionResult(**answer)
        self.results.append(result)
        if result.last_step is not None:
            self._last_covered = result.last_step
            # Whole blocks only: the manifest holds all of the block of its last step (which
            # need not be the block's last step: not every step is saved).
            end = (result.last_step // self.chunk_steps + 1) * self.chunk_steps
            self._covered = max(self._covered, end)
        if result.chunks_written:
            logger.debug("Compacted the index as it is written: %s", result)


CHILD_TIMEOUT_S = 3600.0
CHILD_STOP_WAIT_S = 10.0  # for a compacting process `end` stopped to be gone
# What the compacting process reports back: the result, less the manifest it left.
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(CompactionResult) if f.name != "manifest")


def compact_once(argv: list[str]) -> int:
    """The compacting process: `out_dir chunk_steps min_files trusted_head_sha256 whole|all`
    (whole blocks only, at the lowest CPU priority; or the tail too, at the caller's). Prints
    its result (or the error) as one JSON line; what the library logs goes to stderr."""
    answer_to = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        out_dir, chunk_steps, min_files, trusted_sha, extent = argv
        if extent == "whole":  # (the last one, once writing ended, is what a close waits for)
            with contextlib.suppress(AttributeError, OSError):
                os.setpriority(os.PRIO_PROCESS, 0, COMPACTION_NICE)
        storage = open_storage(out_dir)
        trusted = None
        if trusted_sha:
            try:
                raw = storage.read(mf.HEAD_KEY)
            except FileNotFoundError:
                raw = b""
            if hashlib.sha256(raw).hexdigest() == trusted_sha:
                trusted = mf.decode_head(raw)
        result = compact_trial(storage, min_files=int(min_files), chunk_steps=int(chunk_steps),
                               whole_chunks=extent == "whole", trusted=trusted)
        answer: dict = {k: getattr(result, k) for k in _RESULT_FIELDS}
        answer["head_sha256"] = "" if result.manifest is None else hashlib.sha256(
            mf.encode_head(result.manifest)).hexdigest()
    except Exception as e:  # said by the writer's side, once
        answer = {"error": f"{type(e).__name__}: {e}"}
    answer_to.write(json.dumps(answer) + "\n")
    answer_to.flush()
    return 0


_compactors: dict[str, RollingCompactor | None] = {}  # None: rolling is off for it
_registry_lock = threading.Lock()
_UNSET = object()


def step_written(out_dir: str, step: int) -> None:
    """The chief's writer of `out_dir` wrote `step`. Returns at once (the work is done on the
    compactor's thread) and never raises: a failure is logged and the writer goes on."""
    try:
        compactor = _compactors.get(out_dir, _UNSET)
        if compactor is _UNSET:
            with _registry_lock:
                compactor = _compactors.get(out_dir, _UNSET)
                if compactor is _UNSET:
                    compactor = _compactors[out_dir] = _new_compactor(out_dir)
        if compactor is not None:
            compactor.step_written(step)  # type: ignore[union-attr]
    except Exception as e:
        logger.warning("smdebug-lite could not finish %s after step %d (step_written): %s",
                       out_dir, step, e)


def writing_ended(out_dir: str) -> None:
    """The chief's writer of `out_dir` is finishing: returns once the trial's compaction in
    progress, and the last one, are done. Never raises."""
    try:
        with _registry_lock:
            compactor = _compactors.pop(out_dir, None)
        if compactor is not None:
            compactor.end()
    except Exception as e:
        logger.warning("smdebug-lite could not finish %s as its writer finished "
                       "(writing_ended): %s", out_dir, e)


def compactor_of(out_dir: str) -> RollingCompactor | None:
    """The compactor of a trial this process's writer is writing (None: none, or off)."""
    return _compactors.get(out_dir)


def _new_compactor(out_dir: str) -> RollingCompactor | None:
    if not (env_bool("SMDEBUG_COMPACT", True) and env_bool("SMDEBUG_COMPACT_ROLLING", True)):
        return None
    return RollingCompactor(out_dir,
                            min_files=env_int("SMDEBUG_COMPACT_MIN_FILES", DEFAULT_MIN_FILES))
