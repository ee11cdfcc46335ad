"""Where trial files live: a local directory or an S3 prefix, behind one small interface."""

from __future__ import annotations

from smdebug_lite.storage.base import Storage, is_s3_path
from smdebug_lite.storage.local import LocalStorage


def open_storage(path: str) -> Storage:
    """LocalStorage for paths, S3Storage for `s3://bucket/prefix` URIs."""
    path = path.strip()
    if is_s3_path(path):
        from smdebug_lite.storage.s3 import S3Storage

        return S3Storage(path)
    return LocalStorage(path)


__all__ = ["Storage", "LocalStorage", "open_storage", "is_s3_path"]
