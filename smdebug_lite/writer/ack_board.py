"""The page on which the writer process posts its progress (see `writer_process`).

Both processes map one small memfd: the writer process writes the token of the last step it
wrote and how many error messages it has sent on the socket; the training process reads them
instead of receiving an acknowledgement per step. On a VM, reading a socket that another CPU
wrote costs tens of microseconds; reading a shared integer costs nothing.
"""

from __future__ import annotations

import mmap
import os


class AckBoard:
    """One shared page: the last step token written, and the count of error messages sent.
    `create` makes it (training process), `attach` maps one received as a file descriptor."""

    size = mmap.PAGESIZE
    _DONE, _ERRORS = 0, 1

    def __init__(self, fd: int, size: int, owner: bool) -> None:
        self.fd = fd
        self.mm = mmap.mmap(fd, size)
        self._slots = memoryview(self.mm).cast("q")
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

    @property
    def done(self) -> int:
        return self._slots[self._DONE]

    @property
    def errors(self) -> int:
        return self._slots[self._ERRORS]

    def post_done(self, token: int) -> None:
        self._slots[self._DONE] = token

    def count_error(self) -> None:
        self._slots[self._ERRORS] += 1
