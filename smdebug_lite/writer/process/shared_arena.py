"""Shared memory that snapshots are copied into, so the writer process reads them in place.

The training process owns an `Arena`: one memfd segment, sized by the writer's pending-bytes
limit. `array()` hands out a numpy array backed by it; the space comes back when that array
(and every view of it) is garbage, which the writer arranges only after the writer process has
written it. Space is carved from the segment's start and, once released, kept for the next
array of the same size: a training run saves the same shapes every time, so the same warm
pages are reused (fresh pages fault on first write, which costs more than the copy). When
every array is released the whole segment is free again. A request that does not fit gets a
segment of its own, dropped on release.

Pages once written stay allocated (they are reused). When the segment starts over and the
recent cycles used much less than was ever written (one unusually large step), the pages beyond
what they used are given back to the OS (`MADV_REMOVE` punches them out of the memfd).

The writer process holds `SegmentMaps`: the same segments, mapped by id.
"""

from __future__ import annotations

import collections
import mmap
import os
import threading
import weakref
from collections.abc import Callable

import numpy as np

_ALIGN = 64
_RECENT_CYCLES = 8  # how many starts-over the kept size looks back on
TRIM_MIN_BYTES = 16 << 20  # give back only this much or more (re-faulting pages costs)


def shared_memory_supported() -> bool:
    return hasattr(os, "memfd_create") and hasattr(mmap, "MAP_SHARED")


class Segment:
    __slots__ = ("id", "size", "mm", "base", "fd")

    def __init__(self, seg_id: int, size: int) -> None:
        self.id = seg_id
        self.size = size
        self.fd = os.memfd_create(f"smdebug-lite-{seg_id}", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, size)  # sparse: pages exist once written
        self.mm = mmap.mmap(self.fd, size)
        probe = np.frombuffer(self.mm, np.uint8, count=1)
        self.base = probe.ctypes.data
        del probe


class _Region:
    __slots__ = ("seg", "offset", "size")

    def __init__(self, seg: Segment, offset: int, size: int) -> None:
        self.seg = seg
        self.offset = offset
        self.size = size


class Arena:
    """Training-process side. `announce(segment)` tells the writer process about a new segment
    and `drop(segment_id)` about one no longer used; both run on the thread calling `array`."""

    def __init__(self, capacity: int, announce: Callable[[Segment], None],
                 drop: Callable[[int], None]) -> None:
        self.capacity = max(_ALIGN, capacity)
        self._announce = announce
        self._drop = drop
        self._next_id = 0
        self._main: Segment | None = None
        self._used = 0  # the main segment is carved from its start up to here
        self._touched = 0  # bytes of the main segment written since they were last given back
        self._recent: collections.deque[int] = collections.deque(maxlen=_RECENT_CYCLES)
        self._free: dict[int, list[_Region]] = {}  # released main-segment regions, by size
        self._live = 0  # main-segment regions handed out and not yet released
        self._own: dict[int, Segment] = {}  # segments of single arrays that did not fit
        self._released: collections.deque[_Region] = collections.deque()  # from _on_dead
        self._regions: dict[int, tuple] = {}  # id(weakref to an array) -> (weakref, region, id(array))
        # id(array) -> (segment id, offset) of every array `array()` handed out and still alive:
        # `locate` finds those without reading the array's address (entries leave at its death,
        # before the id can be reused).
        self._homes: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    @property
    def segments(self) -> list[Segment]:
        return ([self._main] if self._main is not None else []) + list(self._own.values())

    def array(self, dtype: np.dtype, shape: tuple[int, ...], wait: Callable[[], bool]) -> np.ndarray:
        """A C-contiguous array in shared memory. When the segment is full, `wait()` is called
        (it should let the writer release something and say whether anything is pending);
        with nothing pending the array gets a segment of its own instead of waiting forever."""
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dtype.itemsize
        size = -(-(nbytes or 1) // _ALIGN) * _ALIGN
        while True:
            with self._lock:
                if self._released:
                    self._collect()
                region = self._take(size)
            if region is not None:
                break
            if size > self.capacity or not wait():
                with self._lock:
                    region = self._take_own(nbytes)
                break
        arr = np.ndarray(shape, dtype, region.seg.mm, region.offset)
        # The region is free again once `arr` and every view of it are gone.
        ref = weakref.ref(arr, self._on_dead)
        self._regions[id(ref)] = (ref, region, id(arr))
        self._homes[id(arr)] = (region.seg.id, region.offset)
        return arr

    def _on_dead(self, ref: weakref.ref) -> None:
        entry = self._regions.pop(id(ref), None)
        if entry is not None:
            self._homes.pop(entry[2], None)
            self._released.append(entry[1])

    def locate(self, arr: np.ndarray) -> tuple[int, int] | None:
        """(segment id, offset) of a C-contiguous array that lives in one of our segments."""
        home = self._homes.get(id(arr))
        if home is not None and arr.nbytes:
            return home
        if not arr.flags.c_contiguous or not arr.nbytes:
            return None
        ptr = arr.__array_interface__["data"][0]
        for seg in self.segments:
            if seg.base <= ptr and ptr + arr.nbytes <= seg.base + seg.size:
                return seg.id, ptr - seg.base
        return None

    # -- internals (under the lock) --------------------------------------------------------

    def _new_segment(self, size: int) -> Segment:
        seg = Segment(self._next_id, size)
        self._next_id += 1
        try:
            self._announce(seg)
        finally:
            os.close(seg.fd)  # both processes keep their mappings
        return seg

    def _take(self, size: int) -> _Region | None:
        if not self._live and self._used:
            self._free.clear()  # everything is released: start the segment over
            self._recent.append(self._used)
            self._touched = max(self._touched, self._used)
            self._used = 0
            self._trim()
        free = self._free.get(size)
        if free:
            self._live += 1
            return free.pop()
        if size > self.capacity:
            return None
        if self._main is None:
            self._main = self._new_segment(self.capacity)
        if self._used + size <= self.capacity:
            region = _Region(self._main, self._used, size)
            self._used += size
        else:  # the smallest released region that is big enough
            fits = [s for s, regions in self._free.items() if regions and s >= size]
            if not fits:
                return None
            region = self._free[min(fits)].pop()
        self._live += 1
        return region

    def _trim(self) -> None:
        """Give back the pages beyond what the recent cycles used, if that is worth it."""
        keep = -(-max(self._recent) // mmap.PAGESIZE) * mmap.PAGESIZE
        if self._main is None or self._touched - keep < TRIM_MIN_BYTES:
            return
        if not hasattr(mmap, "MADV_REMOVE"):
            return
        try:
            self._main.mm.madvise(mmap.MADV_REMOVE, keep, self._touched - keep)
        except OSError:
            return  # the pages stay allocated and in use: no harm
        self._touched = keep

    def _take_own(self, nbytes: int) -> _Region:
        seg = self._new_segment(max(nbytes, 1))
        self._own[seg.id] = seg
        return _Region(seg, 0, seg.size)

    def _collect(self) -> None:
        released = self._released
        while released:
            region = released.popleft()
            seg = region.seg
            if seg is self._main:
                self._live -= 1
                self._free.setdefault(region.size, []).append(region)
            elif self._own.pop(seg.id, None) is not None:
                seg.mm = None  # unmapped once the last view is gone
                self._drop(seg.id)


class SegmentMaps:
    """Writer-process side: segments by id, and arrays viewed in them."""

    def __init__(self) -> None:
        self._maps: dict[int, mmap.mmap] = {}

    def add(self, seg_id: int, fd: int, size: int) -> None:
        try:
            self._maps[seg_id] = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def drop(self, seg_id: int) -> None:
        self._maps.pop(seg_id, None)

    def array(self, seg_id: int, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        count = 1
        for d in shape:
            count *= int(d)
        return np.frombuffer(self._maps[seg_id], dtype, count=count, offset=offset).reshape(shape)
