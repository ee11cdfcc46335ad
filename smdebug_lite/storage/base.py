"""The storage interface every reader and writer goes through."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

Chunks = Sequence["bytes | bytearray | memoryview"]


def is_s3_path(path: str) -> bool:
    return path.strip().lower().startswith("s3://")


class Storage(ABC):
    """A trial root. Keys are relative, '/'-separated (e.g. 'index/000000000/..._worker_0.json')."""

    root: str

    @abstractmethod
    def write_atomic(self, rel: str, data: bytes | Chunks) -> None:
        """Readers see either nothing or the whole file, never a part of it."""

    @abstractmethod
    def read(self, rel: str, start: int = 0, length: int | None = None) -> bytes:
        """Bytes of a file, or of a range of it; FileNotFoundError if it does not exist."""

    def read_many(self, rels: Sequence[str]) -> list[bytes]:
        """Whole files; S3 overrides this to download concurrently."""
        return [self.read(r) for r in rels]

    def read_ranges(self, rels: Sequence[str], starts: Sequence[int],
                    lengths: Sequence[int]) -> list[bytes]:
        """`lengths[i]` bytes of `rels[i]` from `starts[i]` (short only where a file is);
        FileNotFoundError names a missing file. Local and S3 storage read them concurrently."""
        return [self.read(r, s, n) for r, s, n in zip(rels, starts, lengths, strict=True)]

    def create_new(self, rel: str, data: bytes) -> bool:
        """Create a file only if none exists (False: one does). Where storage cannot do that
        atomically (S3), NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot create a file exclusively")

    @abstractmethod
    def exists(self, rel: str) -> bool: ...

    @abstractmethod
    def list(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        """Sorted relative keys of files under `rel_prefix`, only those after `start_after`."""

    @abstractmethod
    def delete(self, rel: str) -> None: ...

    @abstractmethod
    def uri(self, rel: str = "") -> str:
        """Full path or URI of a key, for messages."""

    @property
    def is_local(self) -> bool:
        return False
