"""The training process's handle on its writer process (`WriterProcess`).

A thread writer's Python (encoding records, building index JSON, file calls) competes with the
training thread for the GIL: on a small machine saving 1.6 MB every 10 steps it slowed training
by about 9%, while the same work in another process cost about 1% (bench/bench_hook.py). So a
hook's steps go to one writer process per training process (`lifecycle`), started on first use:

- snapshots are copied into shared memory (`Arena`) and described to the writer process by
  (segment, offset, dtype, shape); small arrays travel inside the message;
- the writer process runs `StepFileWriter` for each out_dir, in order, and posts each step it
  has written on a shared page (`AckBoard`), which the training process reads without a system
  call; an acknowledged step's shared memory is reused;
- a step in the same shared buffers, under the same names, as the last one is sent as "again"
  (step numbers and wall times only), on the board's ring where it can;
- errors come back on the socket (the board counts them, so the training process knows when to
  read) and are raised on the next `submit`, as the thread writer does;
- if the writer process dies (killed, out of memory), each writer notices on its next call and
  moves on (`ProcessTrialWriter`); steps handed over and not yet acknowledged still have their
  data here (their memory is reused only once they are acknowledged), so they can be handed
  over again.

The parent uses no thread of its own: the board is read when the training thread next submits,
allocates or flushes. While steps keep coming, the writer process polls instead of blocking on
the socket (see `main`): on a VM, a message that wakes a blocked process cost the sender tens
of microseconds.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

import numpy as np

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.log.logger import get_logger
from smdebug_lite.writer.child_process import child_argv
from smdebug_lite.writer.pending_step import PendingStep
from smdebug_lite.writer.process.ack_board import RING_SUPPORTED, AckBoard
from smdebug_lite.writer.process.channel import STORAGE_ENV_PREFIXES, Channel, ChannelClosed
from smdebug_lite.writer.process.shared_arena import Arena, Segment
from smdebug_lite.writer.protocol import TrialWriter
from smdebug_lite.writer.writer_waits import DEFAULT_MAX_PENDING_BYTES, WriterWaits

logger = get_logger(__name__)

INLINE_BYTES = 4096  # arrays up to this size (not already in shared memory) travel inside the message
ACK_WAIT_S = 0.0005  # how often a full arena looks at the ack board while it waits
# The ring is used only while the writer process's polling lasts at least this much longer.
RING_MARGIN_S = 0.5
# Writer ids and step tokens, from one counter for all writer processes of this process: a
# token is never reused, so an acknowledgement on one board never stands for a step of another.
_IDS = itertools.count()


def _start_timeout_s() -> float:
    return env_float("SMDEBUG_WRITER_START_TIMEOUT_S", 60.0, above=0.0)


def _no_replacement(_dead: WriterProcess) -> None:
    return None


class WriterProcessError(RuntimeError):
    """The writer process failed to write, or exited."""


class WriterProcess:
    """The training process's handle on its writer process (one per training process)."""

    def __init__(self, capacity: int = DEFAULT_MAX_PENDING_BYTES,
                 find_replacement: Callable[[WriterProcess], WriterProcess | None] | None = None,
                 ) -> None:
        """`find_replacement(dead)`: where writers go once this process died (`lifecycle`)."""
        start_timeout = _start_timeout_s()
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.popen = subprocess.Popen(
                child_argv("smdebug_lite.writer.process.main", "main", str(child_sock.fileno())),
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                close_fds=True)
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        self.pid_owner = os.getpid()
        self._find_replacement = find_replacement or _no_replacement
        self.channel = Channel(parent_sock)
        self.lock = threading.RLock()
        self.dead: str | None = None  # why it is gone, once it is
        self._seq = 0  # sequence number of the next message, sent or posted on the ring
        self.waits = WriterWaits(capacity)
        self._ids = _IDS
        self._writers: dict[int, TrialWriter] = {}  # by writer id
        # token -> (step writer, what must stay alive until written, writer id)
        self._in_flight: dict[int, tuple] = {}
        self._replies: dict[int, tuple] = {}  # token -> reply of a flush/close
        self.arena = Arena(capacity, self._announce, self._drop)
        try:
            reply = self.channel.recv(start_timeout)
        except ChannelClosed:
            reply = None
        if reply is None or reply[0] != "ready":
            self.popen.kill()
            self.channel.close()
            code = self.popen.wait()
            raise WriterProcessError(f"the writer process did not start (exit code {code}; its "
                                     f"errors are above) within {start_timeout:.0f}s")
        self.board = AckBoard.create()
        self._acked = -1  # the last step token whose acknowledgement was handled
        self._errors_seen = 0
        try:
            self.send(("board", self.board.size), fds=(self.board.fd,), poll=False)
        finally:
            self.board.close_fd()

    # -- messages --------------------------------------------------------------------------

    def send(self, msg: tuple, fds: tuple[int, ...] = (), poll: bool = True) -> None:
        with self.lock:
            if self.dead:
                raise WriterProcessError(self.dead)
            if poll:
                self.poll()
            seq = self._seq
            try:
                self.channel.send((seq, *msg), fds)
            except ChannelClosed:
                self._died()
                raise WriterProcessError(self.dead) from None
            self._seq = seq + 1

    def post_again(self, wid: int, token: int, step: int, mode: int, mode_step: int,
                   wall: float, template: int) -> bool:
        """Post a repeat step on the board's ring instead of sending it (see `AckBoard`), when
        the writer process is polling and the ring has room. The caller holds `lock`."""
        board = self.board
        if (not RING_SUPPORTED or self.dead
                or time.monotonic() > board.active_until - RING_MARGIN_S):
            return False
        if not board.post_again(self._seq, wid, token, step, mode, mode_step, wall, template):
            return False
        self._seq += 1
        return True

    def post_repeat(self, wid: int, sw: PendingStep, template: int) -> bool:
        """Hand over a repeat step of writer `wid` (`sw.repeat`, every tensor at one wall time)
        in the steady case, with one look at the board: the writer process polling, no error
        posted, room on the ring. Takes the acknowledgements posted since the last look, then
        posts the step. False: nothing done; the caller takes the general path, which reads
        the socket, moves on from a dead writer process or sends the step."""
        if not RING_SUPPORTED:
            return False
        board = self.board
        with self.lock:
            done, errors, active_until = board.look()
            if (self.dead or errors != self._errors_seen
                    or time.monotonic() > active_until - RING_MARGIN_S):
                return False
            if done != self._acked:
                self._take_acks(done)
            token = next(self._ids)
            if not board.post_again(self._seq, wid, token, sw.step, sw.mode.value, sw.mode_step,
                                    sw.repeat[2], template):
                return False
            self._seq += 1
            sw.token = token
            self._in_flight[token] = (sw, (), wid)
            return True

    def poll(self, timeout: float = 0) -> bool:
        """Handle the steps written since the last call (read from the ack board, no system
        call) and, when an error was posted or `timeout` asks to wait for a reply, the messages
        on the socket (waiting up to `timeout` for the first)."""
        with self.lock:
            if self.dead:
                return False
            got = self._take_acks()
            if timeout or self.board.errors != self._errors_seen:
                # (an error message is sent before the board counts it: it is there to read)
                for msg in self._recv_all(timeout):
                    got = True
                    self._handle(msg)
            return got

    def _take_acks(self, done: int | None = None) -> bool:
        """Steps are written in the order sent: every token up to the board's is done.
        `done`: the board's token, when the caller just read it."""
        if done is None:
            done = self.board.done
        if done == self._acked:
            return False
        self._acked = done
        in_flight = self._in_flight
        while in_flight:
            token = next(iter(in_flight))
            if token > done:
                break
            sw = in_flight.pop(token)[0]
            if sw.on_written is not None:
                sw.on_written()
            # dropping `_keep` frees the step's shared memory
        return True

    def wait_reply(self, token: int, timeout: float) -> tuple:
        deadline = time.monotonic() + timeout
        with self.lock:
            while token not in self._replies:
                if self.dead:
                    raise WriterProcessError(self.dead)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WriterProcessError(f"the writer process did not answer within {timeout:.0f}s")
                self.poll(min(left, 1.0))
            return self._replies.pop(token)

    def _recv_all(self, timeout: float) -> list[tuple]:
        try:
            return self.channel.recv_available(timeout)
        except ChannelClosed:
            self._died()
            return []

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "error":
            self._errors_seen += 1
            w = self._writers.get(msg[1])
            if w is not None and w.error is None:
                w.error = WriterProcessError(msg[2])
                # The hook reports it loudly, once, when it sees the error (`WriteFailed`).
                logger.warning("smdebug-lite writer failed on %s: %s", w.out_dir, msg[2])
        elif kind in ("flushed", "closed"):
            self._replies[msg[1]] = msg

    def _died(self) -> None:
        """Note the death; each writer moves on at its next call (`ProcessTrialWriter`)
        and says so. The steps in flight stay here, with their data, until then."""
        if self.dead:
            return
        code = self.popen.poll()
        if code is None:
            try:
                code = self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        if code is None:
            how = "stopped answering"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name} (exit code {code})"
        else:
            how = f"exited with code {code}"
        self.dead = f"the smdebug-lite writer process (pid {self.popen.pid}) {how}"
        logger.debug("%s", self.dead)
        with contextlib.suppress(OSError):
            self.channel.close()

    def take_unwritten(self, wid: int) -> list[PendingStep]:
        """(Once dead) the steps of writer `wid` handed over and never acknowledged, in order.
        Acknowledgements it posted before dying are taken first."""
        with self.lock:
            self._take_acks()
            tokens = [t for t, entry in self._in_flight.items() if entry[2] == wid]
            return [self._in_flight.pop(t)[0] for t in tokens]

    # -- shared memory ---------------------------------------------------------------------

    def _announce(self, seg: Segment) -> None:
        if not self.dead:  # (a dead one's memory still serves its snapshots until handed over)
            self.send(("segment", seg.id, seg.size), fds=(seg.fd,))

    def _drop(self, seg_id: int) -> None:
        if not self.dead:
            self.send(("drop", seg_id))

    def shared_array(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        return self.arena.array(dtype, shape, self._wait_for_space)

    def _wait_for_space(self) -> bool:
        """Wait for the writer to finish a step; False when it has nothing to finish."""
        with self.lock:
            if not self._in_flight or self.dead:
                return False
            start = time.perf_counter()
            while not self.poll() and self._in_flight and not self.dead:
                if self.popen.poll() is not None:
                    self._died()
                    break
                time.sleep(ACK_WAIT_S)
            waited = time.perf_counter() - start
        self.waits.add(waited)
        return True

    def describe(self, value, keep: list) -> tuple:
        """How the writer process finds an array: in shared memory, or inside the message."""
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        dtype = arr.dtype
        if dtype.kind in "OUS":  # strings: pickled with the message
            return ("object", arr)
        dt = dtype.str if dtype.isbuiltin == 1 else dtype  # (a string pickles fastest; 2: ml_dtypes)
        loc = self.arena.locate(arr)  # (first: snapshots in shared memory stay there, any size)
        if loc is not None:
            return ("shm", loc[0], loc[1], dt, arr.shape)
        if arr.nbytes <= INLINE_BYTES:
            return ("inline", arr.tobytes(), dt, arr.shape)
        shared = self.shared_array(dtype, arr.shape)
        np.copyto(shared, arr, casting="no")
        keep.append(shared)
        loc = self.arena.locate(shared)
        return ("shm", loc[0], loc[1], dt, arr.shape)

    # -- writers ---------------------------------------------------------------------------

    def open(self, w: TrialWriter, previous: int | None = None) -> int:
        """Open `w`'s out_dir in the writer process; returns the writer id `w` goes by here.
        `previous`: its id in a writer process that died, whose work this one takes over."""
        wid = next(self._ids)
        self._writers[wid] = w
        msg = ("open", wid, w.out_dir, w.worker, _storage_env(), previous, w.chief)
        try:
            self.send(msg)
        except BaseException:
            self._writers.pop(wid, None)
            raise
        return wid

    def forget(self, wid: int) -> None:
        """Writer `wid` is closed here, or moved to another writer process."""
        self._writers.pop(wid, None)

    def replacement(self) -> WriterProcess | None:
        """(Once dead) the writer process its writers move to; None: a thread instead."""
        return self._find_replacement(self)

    def track(self, sw: PendingStep, keep: list, wid: int) -> int:
        token = sw.token = next(self._ids)
        self._in_flight[token] = (sw, keep, wid)
        return token

    @property
    def pid(self) -> int:
        return self.popen.pid

    def new_token(self) -> int:
        return next(self._ids)


def _storage_env() -> dict[str, str]:
    """The variables storage reads (S3 endpoint, region, credentials), as they are now: the
    writer process was started earlier and may have an older environment."""
    return {k: v for k, v in os.environ.items() if k.startswith(STORAGE_ENV_PREFIXES)}
