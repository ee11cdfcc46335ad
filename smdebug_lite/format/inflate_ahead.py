"""A zlib section inflated in a background thread, piece by piece, while the caller uses the
pieces already out.

zlib releases the GIL while it inflates. Opening a short compacted trial inflates its
documents (7 MB for 1,000 steps x 50 tensors) and then parses them; inflated ahead, the
inflating of the rest runs on another core while the first documents are parsed, instead of
all of it before. A small section is inflated in the caller's thread: a thread costs more than
it saves there.
"""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Iterator

AHEAD_MIN_BYTES = 128 * 1024  # compressed: smaller sections are inflated in one call
FIRST_PIECE = 256 * 1024  # inflated bytes: the caller starts on these while the rest inflates
PIECE = 1024 * 1024


class InflateError(ValueError):
    """The section is not zlib data, ends early, or inflates to more than its limit."""


def inflate_pieces(data: bytes, limit: int) -> Iterator[bytes]:
    """The inflated bytes of `data`, in order, in pieces (inflated ahead for a large section).
    Raises InflateError in the caller's thread, after the pieces before the problem."""
    if len(data) < AHEAD_MIN_BYTES:
        yield inflate_whole(data, limit)
        return
    out: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()  # the caller left early: stop inflating
    threading.Thread(target=_inflate_into, args=(data, limit, out, stop), daemon=True,
                     name="smdebug-lite-inflate").start()
    try:
        while True:
            piece = out.get()
            if piece is None:
                return
            if isinstance(piece, InflateError):
                raise piece
            yield piece
    finally:
        stop.set()


def inflate_whole(data: bytes, limit: int) -> bytes:
    """`data` inflated in one call (at most `limit` bytes, else InflateError)."""
    try:
        d = zlib.decompressobj()
        out = d.decompress(data, limit)
    except zlib.error as e:
        raise InflateError(f"not zlib data ({e})") from None
    if d.unconsumed_tail or not d.eof:
        raise InflateError("truncated or too large")
    return out


def _inflate_into(data: bytes, limit: int, out: queue.SimpleQueue,
                  stop: threading.Event) -> None:
    """The worker: puts each piece, then None at the end, or an InflateError."""
    try:
        d = zlib.decompressobj()
        tail, left, size = data, limit, FIRST_PIECE
        while not d.eof:
            if stop.is_set():
                return
            if left <= 0:
                raise InflateError("truncated or too large")
            before = len(tail)
            piece = d.decompress(tail, min(size, left))
            tail = d.unconsumed_tail
            left -= len(piece)
            if piece:
                out.put(piece)
            elif not tail or len(tail) == before:  # nothing came out, and no more will
                raise InflateError("truncated or too large")
            size = PIECE
        out.put(None)
    except zlib.error as e:
        out.put(InflateError(f"not zlib data ({e})"))
    except InflateError as e:
        out.put(e)


__all__ = ["AHEAD_MIN_BYTES", "InflateError", "inflate_pieces", "inflate_whole"]
