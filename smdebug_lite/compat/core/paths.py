"""Path helpers of ``smdebug.core.utils`` that the access layer needs too.

They live apart from ``utils`` so that both import them from here, one way: ``utils`` also
serves ``check_dir_exists`` from the access layer, which must not import ``utils`` back.
"""

from __future__ import annotations

import os


def is_s3(path: str) -> tuple[bool, str | None, str | None]:
    """``(True, bucket, key)`` for an ``s3://`` URI, else ``(False, None, None)``."""
    if not path.startswith("s3://"):
        return False, None, None
    bucket, _, key = path[5:].partition("/")
    return True, bucket, key


def ensure_dir(file_path: str, is_file: bool = True) -> None:
    """Create the directory of a file (or the directory itself with ``is_file=False``)."""
    directory = os.path.dirname(file_path) if is_file else file_path
    if directory and not os.path.exists(directory):
        os.makedirs(directory, exist_ok=True)


__all__ = ["ensure_dir", "is_s3"]
