"""`open_trial_writer`: the writer a hook gets for one worker's out_dir.

Through the writer process (`writer.process`) where it works: Linux (memfd and file descriptor
passing), a process that starts, and ``SMDEBUG_WRITER`` not ``thread``. Otherwise a thread of
the training process (`ThreadTrialWriter`) does the same work.
"""

from __future__ import annotations

from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage
from smdebug_lite.writer.process.handle import WriterProcessError
from smdebug_lite.writer.process.lifecycle import writer_process
from smdebug_lite.writer.process.trial_writer import ProcessTrialWriter
from smdebug_lite.writer.protocol import TrialWriter
from smdebug_lite.writer.thread_writer import ThreadTrialWriter

logger = get_logger(__name__)


def open_trial_writer(out_dir: str, worker: str = "worker_0", chief: bool = False,
                      storage: Storage | None = None) -> TrialWriter:
    """A writer for one worker's out_dir (a path or an s3:// URI); `chief`: the chief
    worker's, which has the trial's index compacted as it writes (`compaction.rolling`).
    `storage`: the out_dir's, when the caller holds it open (writing from this process uses it;
    the writer process opens its own)."""
    proc = writer_process()
    if proc is not None:
        try:
            return ProcessTrialWriter(proc, out_dir, worker, chief=chief, storage=storage)
        except WriterProcessError as e:
            logger.warning("smdebug-lite writer process unusable (%s); writing from a thread", e)
    return ThreadTrialWriter(out_dir, worker, chief=chief, storage=storage)
