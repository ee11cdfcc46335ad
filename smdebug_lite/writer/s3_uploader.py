"""Uploads staged files to S3 in the order they were finished, with retries.

Order matters: an event file goes up before the index that points into it. Large files use
multipart (boto3's transfer manager). A file that still fails after the retries is reported as
an error, never dropped silently; staged copies are removed once uploaded.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from smdebug_lite.logger import get_logger
from smdebug_lite.storage.s3 import parse_s3_uri, s3_client

logger = get_logger(__name__)
_STOP = object()


class S3Uploader:
    def __init__(self, staging_dir: str, s3_uri: str, retries: int = 5) -> None:
        self.staging_dir = staging_dir
        self.bucket, self.prefix = parse_s3_uri(s3_uri)
        self.retries = retries
        self.error: BaseException | None = None
        self.uploaded = 0
        self._queue: queue.Queue = queue.Queue()
        # A file staged again before its earlier upload ran (the collections file is rewritten
        # when it learns tensor names) is uploaded once, from its newest content.
        self._pending: dict[str, int] = {}
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="smdebug-lite-s3-upload", daemon=True)
        self._thread.start()

    def enqueue(self, rel: str) -> None:
        with self._pending_lock:
            self._pending[rel] = self._pending.get(rel, 0) + 1
        self._queue.put(rel)

    def _superseded(self, rel: str) -> bool:
        """True when a later enqueue of the same file follows (this one is then skipped)."""
        with self._pending_lock:
            n = self._pending.get(rel, 0) - 1
            if n <= 0:
                self._pending.pop(rel, None)
            else:
                self._pending[rel] = n
            return n > 0

    def wait(self) -> None:
        """Block until every enqueued file is uploaded (or has failed)."""
        self._queue.join()

    def close(self) -> None:
        self.wait()
        self._queue.put(_STOP)
        self._thread.join(timeout=60)

    def _run(self) -> None:
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
        while True:
            rel = self._queue.get()
            try:
                if rel is _STOP:
                    return
                self._upload(rel, config)
            finally:
                self._queue.task_done()

    def _upload(self, rel: str, config) -> None:
        local = os.path.join(self.staging_dir, rel)
        key = self.prefix + rel
        if self._superseded(rel):
            return
        if self.error is not None:
            # Stop at the first failure: an index must never arrive without its event file.
            # What is not uploaded stays staged, so nothing saved is lost.
            return
        for attempt in range(1, self.retries + 1):
            try:
                staged = os.stat(local)
                s3_client().upload_file(local, self.bucket, key, Config=config)
                self.uploaded += 1
                # The file may have been staged again (a new inode, renamed into place) while
                # this upload ran; that newer copy is uploaded by its own queue entry.
                if os.stat(local).st_ino == staged.st_ino:
                    os.unlink(local)
                return
            except Exception as e:
                if attempt == self.retries or _permanent(e):
                    self.error = RuntimeError(
                        f"upload of {local} to s3://{self.bucket}/{key} failed after {attempt} "
                        f"attempts ({e}); files not yet uploaded are kept in {self.staging_dir}")
                    logger.error("%s", self.error)
                    return
                delay = min(8.0, 0.25 * 2**attempt)
                logger.warning("Upload of s3://%s/%s failed (%s); retrying in %.1fs",
                               self.bucket, key, e, delay)
                time.sleep(delay)


_PERMANENT_CODES = frozenset({"NoSuchBucket", "AccessDenied", "InvalidAccessKeyId",
                              "SignatureDoesNotMatch", "AllAccessDisabled", "InvalidBucketName"})


def _permanent(error: BaseException) -> bool:
    """Errors that retrying cannot fix (the bucket is gone, access is denied)."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        response = getattr(e, "response", None)
        if isinstance(response, dict) and response.get("Error", {}).get("Code") in _PERMANENT_CODES:
            return True
        if any(code in str(e) for code in _PERMANENT_CODES):
            return True
        e = e.__cause__ or e.__context__
    return False
