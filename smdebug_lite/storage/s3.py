"""S3 storage through boto3: paginated incremental listing, ranged GETs, concurrent downloads.

The endpoint comes from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (honoured explicitly so
older boto3 releases behave the same).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from smdebug_lite.storage.base import Chunks, Storage
from smdebug_lite.storage.ranges import Span, coalesce, slice_ranges

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


def s3_client():
    """One shared, thread-safe client per endpoint/region (boto3 clients are thread-safe)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    key = (endpoint, region, os.getpid())
    with _client_lock:
        client = _clients.get(key)
        if client is None:
            cfg = Config(max_pool_connections=32, retries={"max_attempts": 5, "mode": "standard"})
            client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region,
                                                    config=cfg)
            _clients[key] = client
        return client


class S3Storage(Storage):
    def __init__(self, uri: str, max_workers: int = 16) -> None:
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.root = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.max_workers = max_workers
        self.requests = 0  # S3 API calls made, for benchmarks and tests

    @property
    def client(self):
        return s3_client()

    def uri(self, rel: str = "") -> str:
        return f"s3://{self.bucket}/{self.prefix}{rel}"

    def write_atomic(self, rel: str, data: bytes | Chunks) -> None:
        body = data if isinstance(data, (bytes, bytearray)) else b"".join(bytes(c) for c in data)
        key = self.prefix + rel
        self.requests += 1
        if len(body) < _MULTIPART_THRESHOLD:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(body))
        else:
            import io

            self.client.upload_fileobj(io.BytesIO(body), self.bucket, key)

    def read(self, rel: str, start: int = 0, length: int | None = None) -> bytes:
        from botocore.exceptions import ClientError

        kwargs = {"Bucket": self.bucket, "Key": self.prefix + rel}
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            kwargs["Range"] = f"bytes={start}-{end}"
        self.requests += 1
        try:
            return self.client.get_object(**kwargs)["Body"].read()
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

        self.requests += 1
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.prefix + rel)
            return True
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def list(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        kwargs = {"Bucket": self.bucket, "Prefix": self.prefix + rel_prefix}
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        out = []
        n = len(self.prefix)
        for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
            self.requests += 1
            out.extend(obj["Key"][n:] for obj in page.get("Contents", ()))
        return out

    def delete(self, rel: str) -> None:
        self.requests += 1
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + rel)
