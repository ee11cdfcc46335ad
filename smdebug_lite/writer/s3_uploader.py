"""Uploads staged files to S3, a few at a time, in an order readers can rely on, with retries.

One file at a time let each throttling back-off hold up the whole queue, so up to
`SMDEBUG_S3_UPLOAD_CONCURRENCY` files (6 by default) go up at once. Only event files may
overtake: they are invisible until an index points into them. Every other file (index files,
the collections file, whatever else is staged) starts only once everything enqueued before it
has finished, so an index never arrives before its event file and index files arrive in the
order they were written. The same file is never uploaded twice at once; a file staged again
before its earlier upload started is uploaded once, from its newest content.

Small files are sent with one PutObject each, read from disk as they are sent (memory stays
bounded by the window); large files use boto3's multipart transfer. Throttling, server errors
and broken connections are retried with full-jitter exponential backoff. A file that still fails
is reported as an error, never dropped silently, and nothing enqueued after it starts: what is
not uploaded stays staged. Staged copies are removed once uploaded.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import deque

from smdebug_lite.config.env_settings import env_int
from smdebug_lite.format.locations import EVENTS_DIR
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage.s3 import parse_s3_uri, s3_client

logger = get_logger(__name__)

CONCURRENCY_ENV = "SMDEBUG_S3_UPLOAD_CONCURRENCY"
_DEFAULT_CONCURRENCY = 6
_MULTIPART_THRESHOLD = 8 << 20
_BACKOFF_BASE_S = 0.05
_BACKOFF_CAP_S = 5.0


def upload_concurrency() -> int:
    """The number of uploads one writer keeps in flight (`SMDEBUG_S3_UPLOAD_CONCURRENCY`, 1 to
    32; anything else is named in a warning and the default used: writing goes on)."""
    return env_int(CONCURRENCY_ENV, _DEFAULT_CONCURRENCY, minimum=1, maximum=32)


class S3Uploader:
    def __init__(self, staging_dir: str, s3_uri: str, retries: int = 10,
                 concurrency: int | None = None) -> None:
        """`retries`: attempts per file; `concurrency`: uploads in flight (default from the
        environment, see `upload_concurrency`)."""
        self.staging_dir = staging_dir
        self.bucket, self.prefix = parse_s3_uri(s3_uri)
        self.retries = retries
        self.concurrency = concurrency or upload_concurrency()
        # How far past the oldest unfinished file workers look for one they may start: event
        # files race ahead of a waiting index by at most this many entries.
        self._lookahead = 4 * self.concurrency
        self.error: BaseException | None = None
        self.uploaded = 0
        self._cond = threading.Condition()
        self._waiting: deque[tuple[int, str]] = deque()  # (sequence number, rel), not started
        self._in_flight: dict[int, str] = {}  # sequence number -> rel, started, not finished
        self._next_seq = 0
        self._stopping = False
        # A file staged again before its earlier upload started is uploaded once.
        self._pending: dict[str, int] = {}
        self._threads = [threading.Thread(target=self._run, name=f"smdebug-lite-s3-upload-{i}",
                                          daemon=True) for i in range(self.concurrency)]
        for t in self._threads:
            t.start()

    def enqueue(self, rel: str) -> None:
        with self._cond:
            self._pending[rel] = self._pending.get(rel, 0) + 1
            seq = self._next_seq
            self._next_seq += 1
            self._waiting.append((seq, rel))
            self._cond.notify_all()

    def wait(self) -> None:
        """Block until every enqueued file is uploaded (or has failed, or was skipped)."""
        with self._cond:
            while self._waiting or self._in_flight:
                self._cond.wait()

    def close(self) -> None:
        self.wait()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=60)

    def _take(self) -> tuple[int, str] | None:
        """The first waiting file that may start now (called with the lock held), or None."""
        oldest = min(self._in_flight, default=None)
        if self._waiting and (oldest is None or self._waiting[0][0] < oldest):
            oldest = self._waiting[0][0]
        busy = set(self._in_flight.values())
        for i, (seq, rel) in enumerate(self._waiting):
            if i >= self._lookahead:
                break
            if rel in busy:
                continue
            if not rel.startswith(EVENTS_DIR + "/") and seq != oldest:
                continue
            del self._waiting[i]
            return seq, rel
        return None

    def _run(self) -> None:
        while True:
            with self._cond:
                item = self._take()
                while item is None:
                    if self._stopping and not self._waiting:
                        return
                    self._cond.wait()
                    item = self._take()
                seq, rel = item
                n = self._pending[rel] - 1
                if n:
                    self._pending[rel] = n
                else:
                    del self._pending[rel]
                skip = n > 0 or self.error is not None
                self._in_flight[seq] = rel
            try:
                if not skip:
                    self._upload(rel)
            finally:
                with self._cond:
                    del self._in_flight[seq]
                    self._cond.notify_all()

    def _upload(self, rel: str) -> None:
        local = os.path.join(self.staging_dir, rel)
        key = self.prefix + rel
        for attempt in range(1, self.retries + 1):
            try:
                self._put(local, key)
                with self._cond:
                    self.uploaded += 1
                return
            except Exception as e:
                if attempt == self.retries or _permanent(e):
                    with self._cond:
                        # Set before this file counts as finished, so that nothing waiting on
                        # it (its index) starts.
                        if self.error is None:
                            self.error = RuntimeError(
                                f"upload of {local} to s3://{self.bucket}/{key} failed after "
                                f"{attempt} attempts ({e}); files not yet uploaded are kept in "
                                f"{self.staging_dir}")
                            logger.error("%s", self.error)
                    return
                delay = random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt))
                logger.warning("Upload of s3://%s/%s failed (%s); retrying in %.2fs",
                               self.bucket, key, e, delay)
                time.sleep(delay)

    def _put(self, local: str, key: str) -> None:
        with open(local, "rb") as f:
            staged = os.fstat(f.fileno())
            if staged.st_size < _MULTIPART_THRESHOLD:
                # One request, retried by `_upload` (botocore's own retries are off for it).
                s3_client(botocore_retries=False).put_object(Bucket=self.bucket, Key=key, Body=f)
            else:
                from boto3.s3.transfer import TransferConfig

                config = TransferConfig(multipart_threshold=_MULTIPART_THRESHOLD,
                                        multipart_chunksize=_MULTIPART_THRESHOLD)
                s3_client().upload_fileobj(f, self.bucket, key, Config=config)
        # The file may have been staged again (a new inode, renamed into place) while this
        # upload ran; that newer copy is uploaded by its own queue entry.
        try:
            if os.stat(local).st_ino == staged.st_ino:
                os.unlink(local)
        except FileNotFoundError:
            pass


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
