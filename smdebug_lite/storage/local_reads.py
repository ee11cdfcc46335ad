"""Many small reads of local files, as cheaply as the OS allows.

Reading a trial means opening thousands of small files (one index and one event file per step).
Each read here is one open (relative to the trial's directory, so the kernel does not resolve
its path again), one pread and one close; consecutive ranges of the same file share one open. The system calls release the GIL, so a long list is
split between a few threads: on two cores that cuts the time of the reads by about a third.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

PARALLEL_MIN = 256  # fewer reads than this are not worth a thread hand-off
_THREADS = max(1, min(4, os.cpu_count() or 1))
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="smdebug-lite-read")
    return _pool


def _forget_pool() -> None:
    """A forked child has none of the parent's threads: a pool inherited from the parent would
    take work and never run it."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


# pread allocates the length asked for before reading: a length beyond this is first cut to
# what the file holds (an index entry may claim any length).
_CHECKED_LENGTH = 1 << 20


def _read_all(fd: int, start: int, length: int | None) -> bytes:
    if length is None or length > _CHECKED_LENGTH:
        left = max(0, os.fstat(fd).st_size - start)
        length = left if length is None else min(length, left)
    data = os.pread(fd, length, start)
    while len(data) < length:  # large reads may come in pieces
        more = os.pread(fd, length - len(data), start + len(data))
        if not more:
            break
        data += more
    return data


def read_local(path: str, start: int = 0, length: int | None = None) -> bytes:
    """One file's bytes from `start`, `length` long (None: to the end), with os-level calls
    (about half the cost of open().read() for small files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _read_all(fd, start, length)
    finally:
        os.close(fd)


def _read_span(root_fd: int, rels: Sequence[str], starts: Sequence[int],
               lengths: Sequence[int | None], lo: int, hi: int) -> list[bytes]:
    out: list[bytes] = []
    append, os_open, os_close, pread, rdonly = out.append, os.open, os.close, os.pread, os.O_RDONLY
    fd = -1
    last = None
    try:
        for rel, start, length in zip(rels[lo:hi], starts[lo:hi], lengths[lo:hi], strict=True):
            if rel != last:
                if fd >= 0:
                    os_close(fd)
                    fd = -1
                fd = os_open(rel, rdonly, dir_fd=root_fd)
                last = rel
            if length is None or length > _CHECKED_LENGTH:
                data = _read_all(fd, start, length)
            else:
                data = pread(fd, length, start)
                if len(data) < length:
                    data = _read_all(fd, start, length)
            append(data)
    finally:
        if fd >= 0:
            os_close(fd)
    return out


def read_many(root: str, rels: Sequence[str], starts: Sequence[int] | None = None,
              lengths: Sequence[int | None] | None = None) -> list[bytes]:
    """Bytes of each `root/rels[i]` from `starts[i]` (default 0), `lengths[i]` long (default or
    None: to the end). Short only where a file is shorter; FileNotFoundError names a missing one."""
    n = len(rels)
    if not n:
        return []
    starts = starts if starts is not None else [0] * n
    lengths = lengths if lengths is not None else [None] * n
    root_fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        try:
            if n < PARALLEL_MIN or _THREADS == 1:
                return _read_span(root_fd, rels, starts, lengths, 0, n)
            per = -(-n // _THREADS)
            spans = [(lo, min(n, lo + per)) for lo in range(0, n, per)]
            futures = [_executor().submit(_read_span, root_fd, rels, starts, lengths, lo, hi)
                       for lo, hi in spans[1:]]
            try:
                out = _read_span(root_fd, rels, starts, lengths, *spans[0])  # this thread's share
                for f in futures:
                    out.extend(f.result())
            finally:
                for f in futures:  # every thread is done with root_fd before it is closed
                    f.cancel() or f.exception()
            return out
        except FileNotFoundError as e:
            if e.filename and not os.path.isabs(e.filename):
                e.filename = os.path.join(root, e.filename)
            raise
    finally:
        os.close(root_fd)
