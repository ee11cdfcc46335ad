"""``smdebug.core.access_layer.s3handler``: list, read and delete S3 objects in batches.

Requests go through smdebug-lite's shared boto3 client (``smdebug_lite.storage.s3.s3_client``),
which honours ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` and retries throttled or failed calls
itself. Batches of reads run on threads rather than smdebug's process pool: the work is waiting
on the network, and threads need no fork of the user's process.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from smdebug_lite.compat.core.paths import is_s3
from smdebug_lite.exceptions import SMDebugError, SMDebugTypeError
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage.local_reads import read_local
from smdebug_lite.storage.s3 import s3_client

logger = get_logger(__name__)

# Errors no retry can fix: the caller has to change credentials, region or permissions.
_FATAL_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}
_MISSING_CODES = {"NoSuchKey", "404", "NoSuchBucket"}


class ReadObjectRequest:
    """One object to read: whole (start None) or from `start`, `length` bytes (None: to the end).

    `path` is ``s3://bucket/key``; a local path is read from disk.
    """

    def __init__(self, path: str, start: int | None = None, length: int | None = None) -> None:
        self.path = path
        self.is_s3, self.bucket, self.key = is_s3(path)
        if not self.is_s3:
            self.key = path
            self.bucket = None
        self.start = 0 if start is None else start
        self.length = length
        self.download_entire_file = start is None

    def describe(self) -> str:
        where = f"s3://{self.bucket}/{self.key}" if self.is_s3 else str(self.key)
        if self.download_entire_file:
            return where
        end = "" if self.length is None else str(self.start + self.length - 1)
        return f"{where} bytes {self.start}-{end}"


class ListRequest:
    """Arguments of one ``list_objects_v2`` listing, named as boto3 names them."""

    def __init__(
        self,
        Bucket: str,
        Prefix: str = "",
        Delimiter: str = "",  # noqa: N803
        StartAfter: str = "",
    ) -> None:  # noqa: N803
        self.bucket = Bucket
        self.prefix = Prefix
        self.delimiter = Delimiter
        self.start_after = StartAfter


class DeleteRequest:
    """Every object under `Prefix` in `Bucket`."""

    def __init__(self, Bucket: str, Prefix: str = "") -> None:  # noqa: N803
        self.bucket = Bucket
        self.prefix = Prefix


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _is_fatal(err: Exception) -> bool:
    """Whether no retry can help: the caller has to fix credentials, region or permissions."""
    from botocore.exceptions import NoCredentialsError, NoRegionError, PartialCredentialsError

    if isinstance(err, (NoCredentialsError, PartialCredentialsError, NoRegionError)):
        return True
    return _error_code(err) in _FATAL_CODES


class S3Handler:
    NUM_RETRIES = 5
    GET_OBJECTS_MULTIPROCESSING_THRESHOLD = 100
    MULTIPROCESSING_POOL_SIZE = 2 * (os.cpu_count() or 1)
    MAX_THREADS = 32

    @staticmethod
    def client():
        """The shared boto3 S3 client (endpoint and region from the environment)."""
        return s3_client()

    @staticmethod
    def list_prefixes(list_requests: list[ListRequest]) -> list[list[str]]:
        if not isinstance(list_requests, list):
            raise SMDebugTypeError(
                "list_prefixes takes a list of ListRequest objects, "
                f"got {type(list_requests).__name__}"
            )
        return [S3Handler.list_prefix(lr) for lr in list_requests]

    @staticmethod
    def list_prefix(lr: ListRequest) -> list[str]:
        """Keys under the prefix (and common prefixes first on each page, with a delimiter).

        A bucket that does not exist lists nothing (with a warning); bad credentials or a denied
        listing raise SMDebugError. Other failures are retried NUM_RETRIES times."""
        from botocore.exceptions import BotoCoreError, ClientError

        for attempt in range(S3Handler.NUM_RETRIES):
            try:
                paginator = S3Handler.client().get_paginator("list_objects_v2")
                pages = paginator.paginate(
                    Bucket=lr.bucket,
                    Prefix=lr.prefix,
                    Delimiter=lr.delimiter,
                    StartAfter=lr.start_after,
                    PaginationConfig={"PageSize": 1000},
                )
                keys: list[str] = []
                for page in pages:
                    if lr.delimiter:
                        keys += [
                            p["Prefix"] for p in page.get("CommonPrefixes", ()) if "Prefix" in p
                        ]
                    keys += [obj["Key"] for obj in page.get("Contents", ()) if "Key" in obj]
                return keys
            except (ClientError, BotoCoreError) as e:
                if _is_fatal(e):
                    raise SMDebugError(f"listing s3://{lr.bucket}/{lr.prefix} failed: {e}") from e
                logger.warning(
                    "Unable to list s3://%s/%s (attempt %d): %s",
                    lr.bucket,
                    lr.prefix,
                    attempt + 1,
                    e,
                )
                if _error_code(e) in _MISSING_CODES:
                    return []
        logger.warning("Unable to list files for %s with prefix %s", lr.bucket, lr.prefix)
        return []

    @staticmethod
    def _make_get_request(request: ReadObjectRequest) -> bytes:
        if not request.is_s3:
            return read_local(str(request.key), request.start, request.length)
        kwargs = {"Bucket": request.bucket, "Key": request.key}
        if not request.download_entire_file:
            end = "" if request.length is None else str(request.start + request.length - 1)
            kwargs["Range"] = f"bytes={request.start}-{end}"
        return S3Handler.client().get_object(**kwargs)["Body"].read()

    @staticmethod
    def get_object(object_request: ReadObjectRequest) -> bytes | None:
        """The object's bytes, or None (logged) when it does not exist or cannot be read."""
        from botocore.exceptions import BotoCoreError, ClientError

        for _ in range(S3Handler.NUM_RETRIES):
            try:
                return S3Handler._make_get_request(object_request)
            except FileNotFoundError:
                logger.error("Failed to read %s: no such file", object_request.describe())
                return None
            except (ClientError, BotoCoreError) as e:
                if _is_fatal(e):
                    raise SMDebugError(f"reading {object_request.describe()} failed: {e}") from e
                code = _error_code(e)
                if code in _MISSING_CODES:
                    logger.error("Failed to read %s: %s", object_request.describe(), code)
                    return None
                logger.warning(
                    "Error %s while reading %s; will retry", e, object_request.describe()
                )
            time.sleep(0.1)
        logger.error("Failed to read %s", object_request.describe())
        return None

    @staticmethod
    def get_objects(
        object_requests: list[ReadObjectRequest],
        use_multiprocessing: bool = True,
        n_process: int | None = None,
    ) -> list[bytes | None]:
        """Bytes of each request, in order (None where one could not be read).

        Many requests are read concurrently on threads; `use_multiprocessing=False` reads them
        one after the other, and `n_process` bounds the concurrency."""
        if not isinstance(object_requests, list):
            raise SMDebugTypeError(
                "get_objects takes a list of ReadObjectRequest objects, "
                f"got {type(object_requests).__name__}"
            )
        workers = S3Handler.MAX_THREADS if n_process is None else max(1, 2 * n_process)
        if not use_multiprocessing or len(object_requests) <= 1:
            return [S3Handler.get_object(r) for r in object_requests]
        with ThreadPoolExecutor(max_workers=min(workers, len(object_requests))) as pool:
            return list(pool.map(S3Handler.get_object, object_requests))

    @staticmethod
    def delete_prefix(path: str | None = None, delete_request: DeleteRequest | None = None) -> None:
        """Delete everything under ``s3://bucket/prefix`` (`path`) or under a DeleteRequest."""
        if path is not None and delete_request is not None:
            raise SMDebugError(ValueError("Only one of path or delete_request can be passed"))
        if path is not None:
            on_s3, bucket, prefix = is_s3(path)
            if not on_s3:
                raise SMDebugError(
                    ValueError(f"path={path!r} is not an S3 location (s3://bucket/prefix)")
                )
            S3Handler.delete_prefixes([DeleteRequest(str(bucket), str(prefix))])
        elif delete_request is not None:
            S3Handler.delete_prefixes([delete_request])

    @staticmethod
    def delete_prefixes(delete_requests: list[DeleteRequest] | None) -> None:
        for request in delete_requests or ():
            keys = S3Handler.list_prefix(ListRequest(Bucket=request.bucket, Prefix=request.prefix))
            for lo in range(0, len(keys), 1000):  # delete_objects takes at most 1000 keys
                batch = [{"Key": k} for k in keys[lo : lo + 1000]]
                S3Handler.client().delete_objects(Bucket=request.bucket, Delete={"Objects": batch})
