"""A trial under an S3 prefix (boto3; honours AWS_ENDPOINT_URL[_S3])."""

from __future__ import annotations

from typing import Any

from smdebug_lite.storage.s3 import S3Storage
from smdebug_lite.trials.trial import Trial


class S3Trial(Trial):
    def __init__(self, name: str, bucket_name: str, prefix_name: str, range_steps: Any = None,
                 **kwargs: Any) -> None:
        prefix = prefix_name.strip("/")
        storage = S3Storage(f"s3://{bucket_name}/{prefix}")
        self.bucket_name = bucket_name
        self.prefix_name = prefix + "/" if prefix else ""
        super().__init__(name, storage, range_steps, **kwargs)

    @property
    def requests(self) -> int:
        """S3 API calls made by this trial so far."""
        return self.storage.requests  # type: ignore[attr-defined]

    def _index_token_root(self) -> str:
        return self.prefix_name  # an S3 key, as smdebug's token was
