"""One worker's files under an out_dir, written synchronously: steps, collections, end marker.

This is the part of writing that touches storage. `TrialWriter` runs it on a background thread
and the writer process (`writer_process`) runs it in a separate interpreter; both hand it
finished `StepWriter`s. For `s3://` out_dirs files are staged in a local directory and uploaded
by `S3Uploader` in the order they were finished.
"""

from __future__ import annotations

import os
import tempfile

from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.locations import END_OF_JOB_FILE, collections_file_name
from smdebug_lite.storage import LocalStorage, Storage, is_s3_path, open_storage
from smdebug_lite.writer.step_writer import StepWriter


class StepFiles:
    """Writes one worker's files under `out_dir` (a path or an s3:// URI)."""

    def __init__(self, out_dir: str, worker: str, staging_dir: str | None = None) -> None:
        self.out_dir = out_dir
        self.worker = worker
        self.uploader = None
        self._own_staging: str | None = None
        if is_s3_path(out_dir):
            from smdebug_lite.writer.s3_uploader import S3Uploader

            staging = staging_dir or tempfile.mkdtemp(prefix="smdebug-lite-staging-")
            if staging_dir is None:
                self._own_staging = staging
            self.storage: Storage = LocalStorage(staging)
            self.uploader = S3Uploader(staging, out_dir)
            self.target: Storage = open_storage(out_dir)
        else:
            self.storage = LocalStorage(out_dir)
            self.target = self.storage
        self._written_steps: set[int] = set()

    @property
    def upload_error(self) -> BaseException | None:
        return None if self.uploader is None else self.uploader.error

    def write_step(self, sw: StepWriter) -> None:
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
        if mark_training_end and self.upload_error is None:
            self.target.write_atomic(END_OF_JOB_FILE, b"")

    def _read_existing(self, sw: StepWriter):
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


def _remove_empty_tree(root: str) -> None:
    """Remove a staging directory whose files were all uploaded; one with files left stays."""
    for dirpath, _dirs, _files in os.walk(root, topdown=False):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
