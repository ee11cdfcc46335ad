"""A lock across test processes, for things built once per machine (side virtualenvs).

pytest-xdist runs tests in several processes; a thread lock does not keep two of them from
building the same venv into the same directory at once.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive lock on `<target>.lock` (beside the directory being built)."""
    lock_path = target.parent / f".{target.name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
