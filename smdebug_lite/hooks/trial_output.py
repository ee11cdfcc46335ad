"""Where a hook's trial goes and whether this worker writes it at all.

One `TrialOutput` per hook: the worker's identity (asked again at the first step, since hooks
are often built before the distributed runtime starts), the claim on a local out_dir, the
writer (opened when the first step is handed over), the collections file and the end marker.
Everything here goes through the hook's one `Storage` for its out_dir.
"""

from __future__ import annotations

from smdebug_lite.config.collection import tensor_names_version
from smdebug_lite.config.collection_manager import CollectionManager
from smdebug_lite.format.locations import END_OF_JOB_FILE
from smdebug_lite.hooks.arguments import HookArguments
from smdebug_lite.hooks.out_dir_claim import OutDirClaim
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage, is_s3_path
from smdebug_lite.writer import (
    ProcessTrialWriter,
    TrialWriter,
    WriteFailed,
    on_sagemaker,
    open_trial_writer,
)

logger = get_logger(__name__)


class SilentDisable(Exception):
    """Another process owns the out_dir: the hook stops saving without an error report."""


class TrialOutput:
    """This worker's side of the trial (see the module docstring)."""

    def __init__(self, arguments: HookArguments, storage: Storage) -> None:
        self.arguments = arguments  # (the hook's: out_dir, include_workers, dry_run)
        self.storage = storage
        self.worker = "worker_0"
        self.num_workers = 1
        self.chief = True
        self.writes = not arguments.dry_run
        self.refused = False  # the storage refused the out_dir (the hook is disabled)
        self.failure_reported = False  # a write failure was reported (close does not again)
        self.writer: TrialWriter | ProcessTrialWriter | None = None
        self.claim: OutDirClaim | None = None
        self.exported_version = -1  # tensor_names_version() last written

    def identify(self, worker: str, num_workers: int, chief_worker: str) -> None:
        """Who this worker is; nothing changes once its writer is open."""
        if self.writer is not None:
            return
        self.worker = worker
        self.num_workers = num_workers
        self.chief = worker == chief_worker
        args = self.arguments
        self.writes = ((args.include_workers == "all" or self.chief) and not args.dry_run
                       and not self.refused)

    def refuse(self) -> None:
        """The storage refused the out_dir: nothing is written."""
        self.refused = True
        self.writes = False

    def writer_for_step(self) -> TrialWriter | ProcessTrialWriter:
        """The writer, opened on first use (raises `SilentDisable` when another process owns
        a local out_dir, `WriteFailed` when it cannot be written)."""
        if self.writer is None:
            try:
                claimed = self._claim_out_dir()
                if claimed:
                    self.writer = open_trial_writer(self.arguments.out_dir, self.worker,
                                                    chief=self.chief, storage=self.storage)
            except OSError as e:  # (a full disk, a read-only or missing mount)
                raise WriteFailed(f"writing to {self.arguments.out_dir} failed: "
                                  f"{type(e).__name__}: {e}") from e
            if not claimed:
                self.writes = False
                raise SilentDisable()
        return self.writer

    def _claim_out_dir(self) -> bool:
        """Several processes that each believe they are the only worker must not interleave
        files (`out_dir_claim`); a distributed run or an S3 out_dir needs no claim."""
        if self.num_workers > 1 or is_s3_path(self.arguments.out_dir):
            return True
        if self.claim is None:
            self.claim = OutDirClaim(self.storage)
        return self.claim.take()

    def collections_json(self, manager: CollectionManager) -> str:
        n = self.num_workers if self.arguments.include_workers == "all" else 1
        return manager.export(None, num_workers=n)

    def export_collections(self, manager: CollectionManager, again: bool = False) -> None:
        """Write the collections file if collections learned tensor names since it was last
        written (`again`: whatever they learned)."""
        version = tensor_names_version()
        if (again or version != self.exported_version) and self.writer is not None:
            self.exported_version = version
            self.writer.write_collections(self.collections_json(manager))

    def finish(self, manager: CollectionManager) -> None:
        """The last collections file, then the writer's end (uploads included); errors are
        reported once, here."""
        try:
            writer = self.writer_for_step()
            self.export_collections(manager, again=True)
            writer.close()
        except SilentDisable:
            pass
        except Exception as e:
            if not (isinstance(e, WriteFailed) and self.failure_reported):
                logger.error("smdebug-lite could not finish writing %s: %s", self.arguments.out_dir, e)

    def mark_training_end(self) -> None:
        """Write the end marker unless the writer did. After a failed writer (a full disk, S3
        refusing writes) it did not, yet readers must learn that no step is coming any more: a
        zero-byte file, written straight to storage (it needs no free block on a full disk).
        Not on SageMaker, where the platform writes it."""
        if not self.writes or on_sagemaker():
            return
        try:
            if not self.storage.exists(END_OF_JOB_FILE):
                self.storage.write_atomic(END_OF_JOB_FILE, b"")
        except Exception as e:
            logger.error("smdebug-lite could not write %s in %s: %s: %s", END_OF_JOB_FILE,
                         self.arguments.out_dir, type(e).__name__, e)

    def release(self) -> None:
        if self.claim is not None:
            self.claim.release()


__all__ = ["SilentDisable", "TrialOutput"]
