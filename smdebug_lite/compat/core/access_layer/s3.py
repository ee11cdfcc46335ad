"""``smdebug.core.access_layer.s3``: an S3 object written whole on ``close()``.

Writes collect in memory and become one upload when the accessor is closed, so an object is
either absent or complete. Uses smdebug-lite's shared client, which honours
``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import io
import os
import re

from smdebug_lite.exceptions import SMDebugError, SMDebugNotImplementedError
from smdebug_lite.storage.s3 import s3_client

from .base import IngestedBytes, TSAccessBase

_MULTIPART_THRESHOLD = 5 * 1024 * 1024


class TSAccessS3(IngestedBytes, TSAccessBase):
    """One object ``s3://bucket_name/key_name``; `binary` False collects ``str`` writes.

    For writing, the bucket is created when it does not exist, as smdebug did (readers pass
    ``create_bucket=False``). Explicit keys are accepted for
    smdebug's signature; credentials otherwise come from the usual boto3 chain."""

    def __init__(
        self,
        bucket_name: str,
        key_name: str,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        binary: bool = True,
        *,
        create_bucket: bool = True,
    ) -> None:
        super().__init__()
        self.bucket_name = bucket_name
        self.key_name = re.sub("/+", "/", key_name)  # S3 keeps repeated slashes; paths do not
        self.binary = binary
        self.flushed = False
        self.current_len = 0
        self._init_data()
        self._ingest(b"")
        if aws_access_key_id or aws_secret_access_key:
            import boto3

            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            self.s3_client = boto3.client(
                "s3",
                aws_access_key_id=aws_access_key_id,
                aws_secret_access_key=aws_secret_access_key,
                endpoint_url=endpoint or None,
                region_name=region or None,
            )
        else:
            self.s3_client = s3_client()
        if create_bucket:
            self._ensure_bucket()

    def _ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self.s3_client.head_bucket(Bucket=self.bucket_name)
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code")) not in ("404", "NoSuchBucket"):
                raise SMDebugError(f"s3://{self.bucket_name}: cannot use the bucket: {e}") from e
            self.s3_client.create_bucket(Bucket=self.bucket_name)

    def _init_data(self) -> None:
        self.data: bytearray | str = bytearray() if self.binary else ""

    def open(self, bucket_name: str, mode: str) -> None:  # type: ignore[override]
        raise SMDebugNotImplementedError("TSAccessS3 opens its object in the constructor")

    def write(self, _data: bytes | str) -> list[int]:
        """Append to the object's bytes; returns [start offset, length]."""
        start = len(self.data)
        self.data += _data  # type: ignore[operator]
        return [start, len(_data)]

    def flush(self) -> None:
        """Nothing to do: the object is uploaded once, on close."""

    def close(self) -> None:
        """Upload what was written (once; a second close does nothing)."""
        if self.flushed:
            return
        body = bytes(self.data) if self.binary else str(self.data).encode("utf-8")
        if len(body) < _MULTIPART_THRESHOLD:
            self.s3_client.put_object(Bucket=self.bucket_name, Key=self.key_name, Body=body)
        else:
            self.s3_client.upload_fileobj(io.BytesIO(body), self.bucket_name, self.key_name)
        self.logger.debug(
            "Wrote %d bytes to s3://%s/%s", len(body), self.bucket_name, self.key_name
        )
        self._init_data()
        self.flushed = True

    def ingest_all(self) -> None:
        response = self.s3_client.get_object(Bucket=self.bucket_name, Key=self.key_name)
        self._ingest(response["Body"].read())

    def _where(self) -> str:
        return f"s3://{self.bucket_name}/{self.key_name}"

    def __enter__(self) -> TSAccessS3:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
