"""S3 storage through boto3: paginated incremental listing, ranged GETs, concurrent downloads.

The endpoint comes from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (honoured explicitly so
older boto3 releases behave the same).

Every request of `S3Storage` (GETs whole or ranged, HEAD, each LIST page, PUT, DELETE) goes
through `S3Storage._call`, the one place that retries. botocore's own retries stop when the
response headers arrive, so a connection reset while the body streams (`ResponseStreamingError`,
`IncompleteReadError`, urllib3's `ProtocolError`) used to fail the read; `_call` makes the
request and reads the whole body, and retries connection failures, read timeouts, throttling
and server errors (503 SlowDown, 500, RequestTimeout ...) with jittered exponential backoff, at
most `SMDEBUG_S3_MAX_ATTEMPTS` times (default 8) and within `retry_budget_s` (a trial sets its
timeout). A throttled request (SlowDown, 503) holds back every request of the same storage
for its backoff delay, so a pool of concurrent GETs eases off together instead of being refused
one by one. `requests` / `request_counts` count every attempt; concurrent reads run on at most
`SMDEBUG_S3_MAX_CONCURRENCY` threads (default 16). The client it uses has botocore's retries
turned off, so attempts do not multiply. A missing bucket and denied access are not retried: `TrialStorageError` names the s3:// URI.
"""

from __future__ import annotations

import http.client
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from smdebug_lite.config.env_settings import env_int
from smdebug_lite.exceptions import TrialStorageError
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage.base import Chunks, Storage
from smdebug_lite.storage.ranges import Span, coalesce, slice_ranges

logger = get_logger(__name__)
T = TypeVar("T")

_MULTIPART_THRESHOLD = 8 * 1024 * 1024
_client_lock = threading.Lock()
_clients: dict[tuple, object] = {}


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """('bucket', 'prefix/') from 's3://bucket/prefix'; the prefix is '' or ends with '/'."""
    rest = uri.strip()[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"{uri!r}: expected s3://bucket[/prefix]")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/" if prefix else "")


def s3_client(botocore_retries: bool = True):
    """One shared, thread-safe client per endpoint/region (boto3 clients are thread-safe).
    `botocore_retries=False`: a client that makes each request once, for callers that retry
    themselves (S3Storage)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    key = (endpoint, region, os.getpid(), botocore_retries)
    with _client_lock:
        client = _clients.get(key)
        if client is None:
            # botocore's "max_attempts" counts retries; "total_max_attempts" the first try too.
            retries = ({"max_attempts": 5, "mode": "standard"} if botocore_retries
                       else {"total_max_attempts": 1, "mode": "standard"})
            cfg = Config(max_pool_connections=32, retries=retries)
            client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region,
                                                    config=cfg)
            _clients[key] = client
        return client


# Error codes and statuses worth another attempt: throttling and transient server trouble.
_RETRY_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestLimitExceeded", "TooManyRequestsException", "BandwidthLimitExceeded",
    "RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete",
    "InternalError", "ServiceUnavailable", "503", "500", "502", "504",
})
_RETRY_STATUS = frozenset({500, 502, 503, 504})
_THROTTLE_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestLimitExceeded", "TooManyRequestsException", "BandwidthLimitExceeded",
})
_DENIED_CODES = frozenset({
    "AccessDenied", "403", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId",
    "SignatureDoesNotMatch", "AccountProblem", "ExpiredToken", "InvalidToken",
})
_BACKOFF_BASE_S = 0.05
_BACKOFF_CAP_S = 5.0


def _max_attempts() -> int:
    return max(1, env_int("SMDEBUG_S3_MAX_ATTEMPTS", 8))


def _transient_errors() -> tuple[type[BaseException], ...]:
    """Failures of the connection or of the body's transfer (a reset mid-body included)."""
    import urllib3.exceptions
    from botocore import exceptions as be

    return (be.HTTPClientError, be.IncompleteReadError, be.ConnectionError,
            urllib3.exceptions.HTTPError, http.client.HTTPException, ConnectionError,
            TimeoutError)


def _error_code(e: BaseException) -> tuple[str, int]:
    response = getattr(e, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def _max_concurrency(default: int) -> int:
    return max(1, env_int("SMDEBUG_S3_MAX_CONCURRENCY", default))


class S3Storage(Storage):
    def __init__(self, uri: str, max_workers: int = 16) -> None:
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        # Concurrent requests of one read_many / read_ranges call (the pool's bound).
        self.max_workers = _max_concurrency(max_workers)
        self.requests = 0  # S3 API calls made (attempts included), for benchmarks and tests
        # The same by kind ("GET", "LIST", "HEAD", "PUT", ...); a ranged GET counts as "GET".
        self.request_counts: dict[str, int] = {}
        self.retries = 0  # attempts that failed and were made again
        self._count_lock = threading.Lock()
        self._throttled_until = 0.0  # monotonic time before which no request is started
        self.max_attempts = _max_attempts()
        self.retry_budget_s = 300.0  # longest time spent retrying one request

    @property
    def client(self):
        return s3_client(botocore_retries=False)

    def uri(self, rel: str = "") -> str:
        return f"s3://{self.bucket}/{self.prefix}{rel}"

    def _call(self, what: str, rel: str, request: Callable[[], T]) -> T:
        """Make one request (`request` also reads the whole response body) with retries.

        A ClientError that is neither transient, a missing bucket nor denied access (e.g.
        NoSuchKey) is raised as it is, for the caller to interpret."""
        from botocore.exceptions import ClientError

        transient = _transient_errors()
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            kind = what.split(" ", 1)[0]
            pause = self._throttled_until - time.monotonic()
            if pause > 0:  # another request was throttled: the whole pool slows down
                time.sleep(pause)
            with self._count_lock:  # pool threads count too: `+=` alone may lose updates
                self.requests += 1
                self.request_counts[kind] = self.request_counts.get(kind, 0) + 1
            try:
                return request()
            except ClientError as e:
                code, status = _error_code(e)
                if code == "NoSuchBucket":
                    raise TrialStorageError(
                        self.root, f"bucket {self.bucket!r} does not exist ({what} {rel!r})",
                        code) from None
                if code in _DENIED_CODES or (status == 403 and code not in _RETRY_CODES):
                    raise TrialStorageError(
                        self.uri(rel), f"access denied ({code or status}) for {what}; check "
                        f"that the credentials in use may read s3://{self.bucket}/{self.prefix}",
                        code) from None
                if code not in _RETRY_CODES and status not in _RETRY_STATUS:
                    raise
                failure: BaseException = e
                reason = f"{code or status}"
                throttled = code in _THROTTLE_CODES or status == 503
            except transient as e:
                failure = e
                reason = type(e).__name__
                throttled = False
            delay = random.uniform(0.0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** attempt))
            if throttled:
                # S3 throttles per prefix: the other requests of the pool would be refused too,
                # so they wait as long as this one before their next attempt.
                self._throttled_until = max(self._throttled_until, time.monotonic() + delay)
            spent = time.monotonic() - started
            if attempt >= self.max_attempts or spent + delay > self.retry_budget_s:
                raise TrialStorageError(
                    self.uri(rel), f"{what} failed {attempt} times in {spent:.1f}s; last error: "
                    f"{reason} ({failure})", reason) from failure
            with self._count_lock:
                self.retries += 1
            logger.debug("S3 %s of %s failed (%s); attempt %d in %.2fs", what, self.uri(rel),
                         reason, attempt + 1, delay)
            time.sleep(delay)

    def write_atomic(self, rel: str, data: bytes | Chunks) -> None:
        body = data if isinstance(data, (bytes, bytearray)) else b"".join(bytes(c) for c in data)
        key = self.prefix + rel
        if len(body) < _MULTIPART_THRESHOLD:
            self._call("PUT", rel, lambda: self.client.put_object(
                Bucket=self.bucket, Key=key, Body=bytes(body)))
        else:
            import io

            self._call("upload", rel, lambda: self.client.upload_fileobj(
                io.BytesIO(body), self.bucket, key))

    def read(self, rel: str, start: int = 0, length: int | None = None) -> bytes:
        from botocore.exceptions import ClientError

        kwargs = {"Bucket": self.bucket, "Key": self.prefix + rel}
        what = "GET"
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            kwargs["Range"] = f"bytes={start}-{end}"
            what = f"GET {kwargs['Range']}"
        try:
            return self._call(what, rel, lambda: self.client.get_object(**kwargs)["Body"].read())
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise FileNotFoundError(self.uri(rel)) from None
            if code == "InvalidRange":
                return b""  # a range starting past the end of a (truncated) object
            raise

    def read_many(self, rels: Sequence[str]) -> list[bytes]:
        if len(rels) <= 1:
            return [self.read(r) for r in rels]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(rels))) as pool:
            return list(pool.map(self.read, rels))

    def read_ranges(self, rels: Sequence[str], starts: Sequence[int],
                    lengths: Sequence[int], max_gap: int = 0) -> list[bytes]:
        """Ranged GETs, concurrently on a bounded pool; ranges of the same object that touch
        (or lie at most `max_gap` bytes apart) go in one request."""
        by_rel: dict[str, list[int]] = {}
        for i, rel in enumerate(rels):
            by_rel.setdefault(rel, []).append(i)
        jobs: list[tuple[str, Span]] = []
        plans: list[tuple[list[int], list[Span], int]] = []
        for rel, idx in by_rel.items():
            spans = coalesce([starts[i] for i in idx], [lengths[i] for i in idx], max_gap)
            plans.append((idx, spans, len(jobs)))
            jobs.extend((rel, span) for span in spans)

        def get(job: tuple[str, Span]) -> bytes:
            rel, (start, end) = job
            return self.read(rel, start, end - start) if end > start else b""

        if len(jobs) <= 1:
            datas = [get(j) for j in jobs]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(jobs))) as pool:
                datas = list(pool.map(get, jobs))
        out: list[bytes] = [b""] * len(rels)
        for idx, spans, first in plans:
            got = slice_ranges(spans, datas[first : first + len(spans)],
                               [starts[i] for i in idx], [lengths[i] for i in idx])
            for i, data in zip(idx, got, strict=True):
                out[i] = data
        return out

    def exists(self, rel: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._call("HEAD", rel, lambda: self.client.head_object(
                Bucket=self.bucket, Key=self.prefix + rel))
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def list(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        """One LIST request per page of 1000 keys, each retried on its own."""
        kwargs = {"Bucket": self.bucket, "Prefix": self.prefix + rel_prefix}
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        out: list[str] = []
        n = len(self.prefix)
        while True:
            page = self._call("LIST", rel_prefix, lambda: self.client.list_objects_v2(**kwargs))
            out.extend(obj["Key"][n:] for obj in page.get("Contents", ()))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return out
            kwargs["ContinuationToken"] = token

    def delete(self, rel: str) -> None:
        self._call("DELETE", rel, lambda: self.client.delete_object(
            Bucket=self.bucket, Key=self.prefix + rel))
