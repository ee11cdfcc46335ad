"""Messages between a training process and its writer process over a Unix socket.

Each message is a pickled tuple behind a 4-byte length. A message may carry file descriptors
(the shared-memory segments tensors are copied into); they travel as SCM_RIGHTS beside the
message's first bytes, and the receiver queues them in order of arrival.

Sends never raise SIGPIPE (``MSG_NOSIGNAL``): a training script that restores SIGPIPE's default
action (a common command-line idiom) would otherwise be killed by writing to a writer process
that died; a dead peer is an EPIPE error here, reported as `ChannelClosed`.
"""

from __future__ import annotations

import array
import collections
import pickle
import select
import socket
import struct

_LEN = struct.Struct("<I")
# Environment variables a writer's "open" message carries: what storage reads.
STORAGE_ENV_PREFIXES = ("AWS_", "BOTO", "SMDEBUG_")
_MAX_FDS = 16
_RECV_BYTES = 1 << 16  # read at most this much per system call
_FDS_SPACE = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
_NO_SIGPIPE = getattr(socket, "MSG_NOSIGNAL", 0)


class ChannelClosed(ConnectionError):
    """The other end closed the socket or exited."""


class Channel:
    """One end of the socket. Not thread-safe: each process uses its end from one thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()
        self._rbuf = bytearray(_RECV_BYTES)
        self._rview = memoryview(self._rbuf)
        self._fds: collections.deque[int] = collections.deque()

    def send(self, msg: tuple, fds: tuple[int, ...] = ()) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        frame = _LEN.pack(len(data)) + data
        try:
            if fds:
                sent = socket.send_fds(self.sock, [frame], list(fds), _NO_SIGPIPE)
                frame = frame[sent:]
            if frame:
                self.sock.sendall(frame, _NO_SIGPIPE)
        except OSError as e:
            raise ChannelClosed(f"writer channel closed: {e}") from e

    def take_fd(self) -> int:
        """The next file descriptor that arrived (one comes with each message announcing it)."""
        if not self._fds:
            raise ChannelClosed("a message announced a file descriptor that did not arrive")
        return self._fds.popleft()

    def recv(self, timeout: float | None = None) -> tuple | None:
        """The next message; None if none arrives within `timeout` (0: only what is buffered)."""
        while True:
            msg = self._parse()
            if msg is not None:
                return msg
            if not self._fill(timeout):
                return None

    def recv_available(self, timeout: float = 0) -> list[tuple]:
        """The messages already buffered, plus one read of what the socket has (waiting up to
        `timeout` for it): one system call however many messages arrived."""
        out = []
        msg = self._parse()
        while msg is not None:
            out.append(msg)
            msg = self._parse()
        if not out and self._fill(timeout):
            msg = self._parse()
            while msg is not None:
                out.append(msg)
                msg = self._parse()
        return out

    def _parse(self) -> tuple | None:
        buf = self._buf
        if len(buf) < 4:
            return None
        (n,) = _LEN.unpack_from(buf)
        if len(buf) < 4 + n:
            return None
        msg = pickle.loads(bytes(buf[4 : 4 + n]))
        del buf[: 4 + n]
        return msg

    def _fill(self, timeout: float | None) -> bool:
        """Read what the socket has; False if nothing arrived in time."""
        if timeout:
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return False
        try:
            flags = socket.MSG_DONTWAIT if timeout == 0 else 0
            # (into a buffer kept for the purpose; socket.recv_fds ignores `flags` before 3.12)
            n, ancdata, _flags, _addr = self.sock.recvmsg_into([self._rbuf], _FDS_SPACE, flags)
        except BlockingIOError:
            return False
        except OSError as e:
            raise ChannelClosed(f"writer channel closed: {e}") from e
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                self._fds.extend(fds)
        if not n:
            raise ChannelClosed("writer channel closed by the other process")
        self._buf += self._rview[:n]
        return True

    def close(self) -> None:
        self.sock.close()
