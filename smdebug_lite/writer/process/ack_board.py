"""The page both processes share (see `handle`): acknowledgements one way, repeat steps
the other.

Both processes map one small memfd.

- The writer process writes the token of the last step it wrote and how many error messages it
  has sent on the socket; the training process reads them instead of receiving an
  acknowledgement per step. On a VM, reading a socket that another CPU wrote costs tens of
  microseconds; reading a shared integer costs nothing.
- The training process posts "again" steps (the same arrays as the last full step: only step
  numbers and a wall time) in a ring on the same page, instead of pickling a message and
  sending it. Each entry carries the message sequence number it takes, so the writer process
  runs ring entries and socket messages in the order they were made. The writer process, while
  it polls, says until when (`active_until`); the training process uses the ring only then,
  since a writer process blocked on the socket would not look at the ring.

Entries are plain stores to shared memory with no fence: the ring is used only where the CPU
keeps stores in program order (x86's TSO), so an entry is complete before its head moves.
"""

from __future__ import annotations

import mmap
import os
import platform
import struct

# (sequence number, writer id, token, step, mode value, mode step, wall time, template slot)
_ENTRY = struct.Struct("<qqqqqqdq")
_ENTRY_SLOTS = 8  # int64 slots per entry
# The slots the training process reads at each step handed over: DONE, ERRORS, (HEAD, TAIL), ACTIVE
_LOOK = struct.Struct("<qq16xd")
# Where stores become visible in program order, so a reader that sees the head moved sees the
# entry behind it.
RING_SUPPORTED = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


class AckBoard:
    """One shared page. `create` makes it (training process), `attach` maps one received as a
    file descriptor (writer process)."""

    size = mmap.PAGESIZE
    # int64 slots: DONE and ERRORS (writer -> trainer), HEAD (trainer: entries posted), TAIL
    # (writer: entries taken), ACTIVE (float64 bits, writer: polling until this monotonic time)
    _DONE, _ERRORS, _HEAD, _TAIL, _ACTIVE = 0, 1, 2, 3, 4
    _RING = 8  # first slot of the ring
    RING_ENTRIES = (mmap.PAGESIZE // 8 - _RING) // _ENTRY_SLOTS

    def __init__(self, fd: int, size: int, owner: bool) -> None:
        self.fd = fd
        self.mm = mmap.mmap(fd, size)
        self._slots = memoryview(self.mm).cast("q")
        self._floats = memoryview(self.mm).cast("d")
        self._ring_entries = min(self.RING_ENTRIES, (size // 8 - self._RING) // _ENTRY_SLOTS)
        self._tail = 0  # (writer process) entries taken so far
        if owner:
            self._slots[self._DONE] = -1

    @classmethod
    def create(cls) -> AckBoard:
        fd = os.memfd_create("smdebug-lite-acks", os.MFD_CLOEXEC)
        os.ftruncate(fd, cls.size)
        return cls(fd, cls.size, owner=True)

    @classmethod
    def attach(cls, fd: int, size: int) -> AckBoard:
        try:
            return cls(fd, size, owner=False)
        finally:
            os.close(fd)

    def close_fd(self) -> None:
        os.close(self.fd)

    # -- writer process -> training process --------------------------------------------------

    @property
    def done(self) -> int:
        return self._slots[self._DONE]

    @property
    def errors(self) -> int:
        return self._slots[self._ERRORS]

    def look(self) -> tuple[int, int, float]:
        """(`done`, `errors`, `active_until`) in one read of the page."""
        return _LOOK.unpack_from(self.mm, 0)

    def post_done(self, token: int) -> None:
        self._slots[self._DONE] = token

    def count_error(self) -> None:
        self._slots[self._ERRORS] += 1

    @property
    def active_until(self) -> float:
        """Until when (time.monotonic) the writer process looks at the ring by itself."""
        return self._floats[self._ACTIVE]

    def post_active_until(self, when: float) -> None:
        self._floats[self._ACTIVE] = when

    # -- the ring of repeat steps ------------------------------------------------------------

    def post_again(self, seq: int, wid: int, token: int, step: int, mode: int, mode_step: int,
                   wall: float, template: int) -> bool:
        """(Training process) post a repeat step; False when the ring is full."""
        slots = self._slots
        head = slots[self._HEAD]
        if head - slots[self._TAIL] >= self._ring_entries:
            return False
        offset = 8 * (self._RING + (head % self._ring_entries) * _ENTRY_SLOTS)
        _ENTRY.pack_into(self.mm, offset, seq, wid, token, step, mode, mode_step, wall, template)
        slots[self._HEAD] = head + 1  # (after the entry: see the module docstring)
        return True

    def take_again(self) -> list[tuple[int, int, int, int, int, int, float, int]]:
        """(Writer process) the entries posted since the last call, oldest first; their places
        are free for new entries once this returns."""
        head = self._slots[self._HEAD]
        tail = self._tail
        if head == tail:
            return []
        n = self._ring_entries
        out = [_ENTRY.unpack_from(self.mm, 8 * (self._RING + (i % n) * _ENTRY_SLOTS))
               for i in range(tail, head)]
        self._tail = head
        self._slots[self._TAIL] = head
        return out
