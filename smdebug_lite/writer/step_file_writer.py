"""One worker's files under an out_dir, written synchronously: steps, collections, end marker.

This is the part of writing that touches storage. `ThreadTrialWriter` runs it on a background
thread and the writer process (`writer.process.main`) in a separate interpreter; both hand it
finished `PendingStep`s. For `s3://` out_dirs files are staged in a local directory and uploaded
by `S3Uploader` in the order they were finished.

A writer that replaces one that died (`resumed`) first looks at what is already there: steps
the dead writer finished may be handed over again (it died before saying they were written),
and are then left as they are; its half-written temporary files are removed. For S3, a step is
acknowledged once staged, so the files the dead writer staged and had not uploaded are uploaded
first (its staging directory is found by name: `staging_name`).
"""

from __future__ import annotations

import glob
import os
import tempfile

from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.locations import (
    END_OF_JOB_FILE,
    EVENTS_DIR,
    INDEX_DIR,
    collections_file_name,
)
from smdebug_lite.storage import LocalStorage, Storage, is_s3_path, open_storage
from smdebug_lite.writer.compaction import rolling
from smdebug_lite.writer.pending_step import PendingStep


class StepFileWriter:
    """Writes one worker's files under `out_dir` (a path or an s3:// URI)."""

    def __init__(self, out_dir: str, worker: str, staging_dir: str | None = None,
                 resumed: bool = False, staging_prefix: str = "smdebug-lite-staging-",
                 previous_staging: str | None = None, chief: bool = False,
                 storage: Storage | None = None) -> None:
        """`staging_prefix`: the name of the staging directory made for an S3 out_dir starts
        with it; `previous_staging`: that of the writer this one takes over from (`resumed`).
        `storage`: the out_dir's storage, when the caller holds it (a hook's); else opened here.
        `chief`: the chief worker's writer has the index compacted as the trial grows
        (`compaction.rolling`, told of each step written and of the writer's end)."""
        self.out_dir = out_dir
        self.worker = worker
        self.chief = chief
        self.uploader = None
        self._own_staging: str | None = None
        if is_s3_path(out_dir):
            from smdebug_lite.writer.s3_uploader import S3Uploader

            staging = staging_dir or tempfile.mkdtemp(prefix=staging_prefix)
            if staging_dir is None:
                self._own_staging = staging
            self.storage: Storage = LocalStorage(staging)
            self.uploader = S3Uploader(staging, out_dir)
            self.target: Storage = storage or open_storage(out_dir)
        else:
            self.storage = storage or LocalStorage(out_dir)
            self.target = self.storage
        self._written_steps: set[int] = set()
        # Steps of this worker already on storage when a writer resumes another's work.
        self._found: set[int] = set()
        if resumed:
            if previous_staging is not None and self.uploader is not None:
                self._upload_left_over(previous_staging)
            self._found = self._look_at_existing()

    @property
    def upload_error(self) -> BaseException | None:
        return None if self.uploader is None else self.uploader.error

    def write_step(self, sw: PendingStep) -> None:
        old_event = b""
        old_doc = None
        if sw.step in self._written_steps or sw.step in self._found:
            # A second writer for an already written step appends: smdebug re-created the
            # writer and its new files replaced the old ones, losing data.
            old_doc, old_event = self._read_existing(sw)
            if sw.step in self._found:
                self._found.discard(sw.step)
                if old_doc is not None and _holds_all(old_doc, sw):
                    # Handed over again after its writer died, which had written it.
                    self._written_steps.add(sw.step)
                    return
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
        if self.chief:
            rolling.step_written(self.out_dir, sw.step)

    def write_collections(self, json_text: str) -> None:
        rel = collections_file_name(self.worker)
        self.storage.write_atomic(rel, json_text.encode("utf-8"))
        self._uploaded(rel)

    def wait_uploads(self) -> None:
        if self.uploader is not None:
            self.uploader.wait()

    def finish(self, mark_training_end: bool) -> None:
        """Wait for uploads, then write `training_job_end.ts` if asked (and nothing failed)."""
        if self.uploader is not None:
            self.uploader.close()
            if self._own_staging is not None and self.upload_error is None:
                _remove_empty_tree(self._own_staging)
        if self.chief:  # (after the uploads: what is compacted last is on S3)
            rolling.writing_ended(self.out_dir)
        if mark_training_end and self.upload_error is None:
            self.target.write_atomic(END_OF_JOB_FILE, b"")

    def _look_at_existing(self) -> set[int]:
        """The steps of this worker on storage; removes this worker's temporary files, which
        only a writer that died can have left (another writer's are never touched)."""
        steps: set[int] = set()
        index_suffix = f"_{self.worker}.json"
        for rel in self.target.list(INDEX_DIR):
            name = rel.rsplit("/", 1)[-1]
            if name.endswith(index_suffix) and name[:12].isdigit():
                steps.add(int(name[:12]))
        if self.target.is_local:
            for prefix in (INDEX_DIR, EVENTS_DIR):
                for rel in self.target.list(prefix):
                    name = rel.rsplit("/", 1)[-1]
                    if name.endswith(".tmp") and f"_{self.worker}." in name:
                        self.target.delete(rel)
        return steps

    def _upload_left_over(self, prefix: str) -> None:
        """Upload what a writer that died had staged (in staging directories named `prefix`...)
        and not uploaded: event files before the index files that point into them."""
        from smdebug_lite.writer.s3_uploader import S3Uploader

        pattern = os.path.join(glob.escape(tempfile.gettempdir()), glob.escape(prefix) + "*")
        for staging in sorted(glob.glob(pattern)):
            staged = LocalStorage(staging)
            left = []
            for rel in staged.list(""):
                if rel.endswith(".tmp"):
                    staged.delete(rel)
                else:
                    left.append(rel)
            if left:
                first = (EVENTS_DIR + "/", INDEX_DIR + "/")
                left.sort(key=lambda rel: (next((i for i, p in enumerate(first)
                                                 if rel.startswith(p)), 2), rel))
                uploader = S3Uploader(staging, self.out_dir)
                for rel in left:
                    uploader.enqueue(rel)
                uploader.close()
                if uploader.error is not None:
                    raise uploader.error
            _remove_empty_tree(staging)

    def _read_existing(self, sw: PendingStep):
        self.wait_uploads()
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


def staging_name(owner_pid: int, wid: int) -> str:
    """How the staging directories of writer `wid` of training process `owner_pid` start, so
    that a writer taking over after a death finds them."""
    return f"smdebug-lite-staging-{owner_pid}-{wid}-"


def _holds_all(doc, sw: PendingStep) -> bool:
    """Whether an index document already has every tensor and shape of `sw`."""
    have = {t.name for t in doc.tensors} | {s.name for s in doc.shapes}
    return all(name in have for name in sw.tensor_names) and all(
        s.name in have for s in sw.shapes)


def _remove_empty_tree(root: str) -> None:
    """Remove a staging directory whose files were all uploaded; one with files left stays."""
    for dirpath, _dirs, _files in os.walk(root, topdown=False):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
