"""Local-directory storage. Writes go to a unique `.tmp` sibling and are renamed into place."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence

from smdebug_lite.storage.base import Chunks, Storage
from smdebug_lite.storage.local_reads import read_local, read_many


class LocalStorage(Storage):
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))
        self._made_dirs: set[str] = set()

    @property
    def is_local(self) -> bool:
        return True

    def uri(self, rel: str = "") -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _ensure_dir(self, d: str) -> None:
        if d not in self._made_dirs:
            os.makedirs(d, exist_ok=True)
            self._made_dirs.add(d)

    def write_atomic(self, rel: str, data: bytes | Chunks) -> None:
        final = os.path.join(self.root, rel)
        self._ensure_dir(os.path.dirname(final))
        # The .tmp suffix never matches the readers' *.json / *.tfevents patterns.
        tmp = f"{final}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(tmp, "wb") as f:
                if isinstance(data, (bytes, bytearray, memoryview)):
                    f.write(data)
                else:
                    for chunk in data:
                        f.write(chunk)
            os.replace(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def read(self, rel: str, start: int = 0, length: int | None = None) -> bytes:
        return read_local(os.path.join(self.root, rel), start, length)

    def read_many(self, rels: Sequence[str]) -> list[bytes]:
        return read_many(self.root, rels)

    def read_ranges(self, rels: Sequence[str], starts: Sequence[int],
                    lengths: Sequence[int]) -> list[bytes]:
        return read_many(self.root, rels, starts, lengths)

    def create_new(self, rel: str, data: bytes) -> bool:
        path = os.path.join(self.root, rel)
        self._ensure_dir(os.path.dirname(path))
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BaseException:
            os.unlink(path)  # (a half-written file must not stand for the whole)
            raise
        return True

    def exists(self, rel: str) -> bool:
        return os.path.exists(os.path.join(self.root, rel))

    def list(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        rel_prefix = rel_prefix.rstrip("/")  # "index/" and "index" list the same keys
        base = os.path.join(self.root, rel_prefix) if rel_prefix else self.root
        if not os.path.isdir(base):
            return []
        out = []
        root_len = len(self.root) + 1
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = dirpath[root_len:].replace(os.sep, "/")
            prefix = f"{rel_dir}/" if rel_dir else ""
            if start_after is not None:
                # Prune whole directories that sort entirely before the token.
                dirnames[:] = [d for d in dirnames if f"{prefix}{d}/\uffff" > start_after]
            for name in filenames:
                key = f"{prefix}{name}"
                if start_after is None or key > start_after:
                    out.append(key)
        out.sort()
        return out

    def delete(self, rel: str) -> None:
        try:
            os.unlink(os.path.join(self.root, rel))
        except FileNotFoundError:
            pass
