"""A trial under an S3 prefix (boto3; honours AWS_ENDPOINT_URL[_S3])."""

from __future__ import annotations

from typing import Any

from smdebug_lite.storage.s3 import S3Storage
from smdebug_lite.trials.trial import Trial


class S3Trial(Trial):
    def __init__(self, name: str, bucket_name: str, prefix_name: str, range_steps: Any = None,
                 **kwargs: Any) -> None:
        prefix = prefix_name.strip("/")
        self._open(name, S3Storage(f"s3://{bucket_name}/{prefix}"), range_steps, **kwargs)

    @classmethod
    def on_storage(cls, name: str, storage: S3Storage, range_steps: Any = None,
                   **kwargs: Any) -> S3Trial:
        """The trial over a storage already made from its URI (`create_trial` parses an
        `s3://bucket/prefix` URI once, into the storage, and takes bucket and prefix from it)."""
        trial = cls.__new__(cls)
        cls._open(trial, name, storage, range_steps, **kwargs)
        return trial

    def _open(self, name: str, storage: S3Storage, range_steps: Any, **kwargs: Any) -> None:
        self.bucket_name = storage.bucket
        self.prefix_name = storage.prefix  # '' or ending with '/'
        super().__init__(name, storage, range_steps, **kwargs)

    @property
    def requests(self) -> int:
        """S3 API calls made by this trial so far."""
        return self.storage.requests  # type: ignore[attr-defined]

    def _index_token_root(self) -> str:
        return self.prefix_name  # an S3 key, as smdebug's token was
