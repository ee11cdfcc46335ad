"""Writing through a separate writer process, so encoding and file I/O never take training's GIL.

A thread writer's Python (encoding records, building index JSON, file calls) competes with the
training thread for the GIL: on a small machine saving 1.6 MB every 10 steps it slowed training
by about 9%, while the same work in another process cost about 1% (bench/bench_hook.py). So a
hook's steps go to one writer process per training process, started on first use:

- snapshots are copied into shared memory (`Arena`) and described to the writer process by
  (segment, offset, dtype, shape); small arrays travel inside the message;
- the writer process runs `StepFiles` for each out_dir, in order, and posts each step it has
  written on a shared page (`AckBoard`), which the training process reads without a system
  call; an acknowledged step's shared memory is reused;
- a step in the same shared buffers, under the same names, as the last one is sent as "again"
  (step numbers and wall times only);
- errors come back on the socket (the board counts them, so the training process knows when to
  read) and are raised on the next `submit`, as the thread writer does; if the writer process
  dies, every writer of this process reports it.

`open_trial_writer` picks this where it works (Linux: memfd and fd passing) and falls back to
`TrialWriter` elsewhere, when the process cannot start, or with ``SMDEBUG_WRITER=thread``.
The parent uses no thread of its own: the board is read when the training thread next submits,
allocates or flushes. While steps keep coming, the writer process polls instead of blocking on
the socket (see `writer_process_main`): on a VM, a message that wakes a blocked process cost the
sender tens of microseconds.
"""

from __future__ import annotations

import itertools
import operator
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np

from smdebug_lite.logger import get_logger
from smdebug_lite.writer.ack_board import RING_SUPPORTED, AckBoard
from smdebug_lite.writer.process_channel import STORAGE_ENV_PREFIXES, Channel, ChannelClosed
from smdebug_lite.writer.shared_arena import Arena, Segment, shared_memory_supported
from smdebug_lite.writer.step_writer import StepWriter
from smdebug_lite.writer.trial_writer import DEFAULT_MAX_PENDING_BYTES, TrialWriter, on_sagemaker
from smdebug_lite.writer.write_failed import WriteFailed
from smdebug_lite.writer.writer_waits import WriterWaits

logger = get_logger(__name__)

INLINE_BYTES = 4096  # arrays up to this size (not already in shared memory) travel inside the message
ACK_WAIT_S = 0.0005  # how often a full arena looks at the ack board while it waits
WRITER_CHOICES = ("process", "thread")
# The ring is used only while the writer process's polling lasts at least this much longer.
RING_MARGIN_S = 0.5


def _start_timeout_s() -> float:
    raw = os.environ.get("SMDEBUG_WRITER_START_TIMEOUT_S", "60")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise WriterProcessError(
            f"SMDEBUG_WRITER_START_TIMEOUT_S={raw!r} must be a positive number of seconds")
    return value


# The writer process imports the same smdebug_lite as this process, from wherever it was loaded,
# without putting that directory ahead of the standard library for anything else.
_BOOTSTRAP = (
    "import sys; root = sys.argv[1]; sys.path.insert(0, root); import smdebug_lite; "
    "sys.path.remove(root); from smdebug_lite.writer.writer_process_main import main; "
    "sys.exit(main(sys.argv[2:]))"
)


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WriterProcessError(RuntimeError):
    """The writer process failed to write, or exited."""


class WriterProcess:
    """The training process's handle on its writer process (one per training process)."""

    def __init__(self, capacity: int = DEFAULT_MAX_PENDING_BYTES) -> None:
        start_timeout = _start_timeout_s()
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, _package_root(), str(child_sock.fileno())],
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                close_fds=True)
        except BaseException:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        self.pid_owner = os.getpid()
        self.channel = Channel(parent_sock)
        self.lock = threading.RLock()
        self.dead: str | None = None
        self._seq = 0  # sequence number of the next message, sent or posted on the ring
        self.waits = WriterWaits(capacity)
        self._ids = itertools.count()
        self._writers: dict[int, ProcessTrialWriter] = {}
        self._in_flight: dict[int, tuple] = {}  # token -> what must stay alive until written
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

    def _take_acks(self) -> bool:
        """Steps are written in the order sent: every token up to the board's is done."""
        done = self.board.done
        if done == self._acked:
            return False
        self._acked = done
        in_flight = self._in_flight
        while in_flight:
            token = next(iter(in_flight))
            if token > done:
                break
            sw, _keep = in_flight.pop(token)
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
                logger.error("smdebug-lite writer failed on %s: %s", w.out_dir, msg[2])
        elif kind in ("flushed", "closed"):
            self._replies[msg[1]] = msg

    def _died(self) -> None:
        if self.dead:
            return
        code = self.popen.poll()
        if code is None:
            try:
                code = self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        self.dead = f"the smdebug-lite writer process (pid {self.popen.pid}) exited (exit code {code})"
        logger.error("%s; steps it had not written are lost", self.dead)
        self._in_flight.clear()
        for w in self._writers.values():
            if w.error is None:
                w.error = WriterProcessError(self.dead)

    # -- shared memory ---------------------------------------------------------------------

    def _announce(self, seg: Segment) -> None:
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

    def open_writer(self, out_dir: str, worker: str) -> ProcessTrialWriter:
        w = ProcessTrialWriter(self, next(self._ids), out_dir, worker)
        self._writers[w.wid] = w
        self.send(("open", w.wid, out_dir, worker, _storage_env()))
        return w

    def track(self, sw: StepWriter, keep: list) -> int:
        token = sw.token = next(self._ids)
        self._in_flight[token] = (sw, keep)
        return token

    def new_token(self) -> int:
        return next(self._ids)


_NAME, _VALUE, _WALL = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _storage_env() -> dict[str, str]:
    """The variables storage reads (S3 endpoint, region, credentials), as they are now: the
    writer process was started earlier and may have an older environment."""
    return {k: v for k, v in os.environ.items() if k.startswith(STORAGE_ENV_PREFIXES)}


class ProcessTrialWriter:
    """`TrialWriter`'s interface over the writer process."""

    def __init__(self, proc: WriterProcess, wid: int, out_dir: str, worker: str) -> None:
        self.proc = proc
        self.wid = wid
        self.out_dir = out_dir
        self.worker = worker
        self.error: BaseException | None = None
        self._closed = False
        # The last two steps sent in full whose arrays all live in shared memory: (their
        # arrays, their tensor names), in the slot the writer process keeps them in. A step made
        # of the same arrays (pooled snapshots reused) under the same names as one of them is
        # sent as "again": the writer process already knows where each one lives. Two, because
        # a writer process that has not finished one step when the next one is captured (every
        # step saved, or a busy machine) has the pools alternate between two sets of buffers.
        self._templates: list[tuple[list, list[str]] | None] = [None, None]
        self._next_template = 0

    @property
    def total_wait_s(self) -> float:
        return self.proc.waits.total_s

    def new_step(self, step: int, mode, mode_step: int) -> StepWriter:
        return StepWriter(step, self.worker, mode, mode_step)

    def submit(self, sw: StepWriter) -> object:
        """Hand a step to the writer process. Returns the template the step now is (its arrays
        and names, which a later `StepWriter.repeat` may refer to), or None."""
        if not len(sw):
            return None
        proc = self.proc
        if sw.repeat is not None:
            tmpl, n, wall = sw.repeat
            template = self._slot_of(tmpl)
            if template < 0 or sw._tensors or sw._shapes:
                raise RuntimeError(f"step {sw.step} was submitted as a repeat of a template "
                                   "this writer no longer holds")
            with proc.lock:  # (the acknowledgements and the handover under one lock)
                self._raise_if_failed()
                self._send_again(sw, template, [wall] * n)
            return tmpl
        self._raise_if_failed()
        entries = sw._tensors
        values = list(map(_VALUE, entries))
        names = list(map(_NAME, entries))
        template = -1 if sw._shapes else self._template_of(values, names)
        if template >= 0:
            self._send_again(sw, template, list(map(_WALL, entries)))
            return self._templates[template]
        keep: list = []
        describe = proc.describe
        tensors = [(name, describe(value, keep), wall) for name, value, wall in entries]
        shapes = [(s.name, s.original_name, s.shape) for s in sw._shapes]
        made = None
        if not shapes and all(t[1][0] == "shm" for t in tensors) and not keep:
            template = self._next_template
            self._next_template = 1 - template
            made = self._templates[template] = (values, names)
        with proc.lock:
            token = proc.track(sw, keep)
            self._send(("step", self.wid, token, sw.step, sw.mode.name, sw.mode_step, tensors,
                        shapes, template), poll=False)  # (_raise_if_failed read the board)
        return made

    def _send_again(self, sw: StepWriter, template: int, walls: list[float]) -> None:
        """The step as a repeat of the template in `template`: on the ring if it can go there."""
        proc = self.proc
        with proc.lock:
            token = proc.track(sw, [])
            if not (walls.count(walls[0]) == len(walls) and proc.post_again(
                    self.wid, token, sw.step, sw.mode.value, sw.mode_step, walls[0], template)):
                self._send(("again", self.wid, token, sw.step, sw.mode.name, sw.mode_step,
                            walls, template), poll=False)

    def holds(self, template: object) -> bool:
        """Whether `template` (from `submit`) is still one this writer can repeat."""
        return template is not None and self._slot_of(template) >= 0

    def _slot_of(self, template: object) -> int:
        templates = self._templates
        return 0 if templates[0] is template else 1 if templates[1] is template else -1

    def _template_of(self, values: list, names: list[str]) -> int:
        """The slot of the template these arrays and names repeat, or -1."""
        for slot, template in enumerate(self._templates):
            if (template is not None and names == template[1]
                    and all(map(operator.is_, values, template[0]))):
                return slot
        return -1

    def write_collections(self, json_text: str) -> None:
        self._send(("collections", self.wid, json_text))

    def flush(self) -> None:
        """Block until everything submitted so far is written (and uploaded, for S3)."""
        self._ask("flush", timeout=3600)
        self._raise_if_failed()

    def close(self, mark_training_end: bool | None = None) -> None:
        """Flush, then write `training_job_end.ts` (not on SageMaker, where the platform does)."""
        if self._closed:
            return
        self._closed = True
        self._templates = [None, None]
        if mark_training_end is None:
            mark_training_end = not on_sagemaker()
        self._ask("close", timeout=3600, extra=(bool(mark_training_end),))
        self.proc._writers.pop(self.wid, None)
        self.proc.waits.log_total()
        self._raise_if_failed()

    def _ask(self, kind: str, timeout: float, extra: tuple = ()) -> None:
        if self.error is not None and kind == "flush":
            return
        token = self.proc.new_token()
        try:
            self.proc.send((kind, self.wid, token, *extra))
            reply = self.proc.wait_reply(token, timeout)
        except WriterProcessError as e:
            self.error = self.error or e
            return
        if reply[2] is not None and self.error is None:
            self.error = WriterProcessError(reply[2])

    def _send(self, msg: tuple, poll: bool = True) -> None:
        try:
            self.proc.send(msg, poll=poll)
        except WriterProcessError as e:
            self.error = self.error or e
            raise WriteFailed(f"writing to {self.out_dir} failed: {e}") from e

    def _raise_if_failed(self) -> None:
        if self.error is None:
            self.proc.poll()
        if self.error is not None:
            raise WriteFailed(f"writing to {self.out_dir} failed: {self.error}") from self.error


# -- choosing a writer ---------------------------------------------------------------------------

_instance: WriterProcess | None = None
_unavailable: str | None = None
_warned_choices: set[str] = set()
_start_lock = threading.Lock()


def writer_process() -> WriterProcess | None:
    """This process's writer process, started on first use; None where writes stay in-process."""
    global _instance, _unavailable
    choice = os.environ.get("SMDEBUG_WRITER", "process").strip().lower()
    if choice == "thread":
        return None
    if choice not in WRITER_CHOICES and choice not in _warned_choices:
        _warned_choices.add(choice)
        logger.warning("SMDEBUG_WRITER=%r is not one of %s; using the writer process", choice,
                       "/".join(WRITER_CHOICES))
    if _usable(_instance):
        return _instance
    with _start_lock:
        if _usable(_instance):
            return _instance
        if _unavailable is not None:
            return None
        if not shared_memory_supported() or not hasattr(socket, "send_fds"):
            _unavailable = "no memfd or fd passing on this platform"
            return None
        try:
            _instance = WriterProcess()
        except Exception as e:
            _unavailable = str(e)
            logger.warning("smdebug-lite could not start its writer process (%s); tensors are "
                           "written by a thread of the training process instead", e)
            return None
        return _instance


def _usable(proc: WriterProcess | None) -> bool:
    """Started by this process (not inherited through fork) and still alive."""
    return proc is not None and proc.pid_owner == os.getpid() and not proc.dead


def open_trial_writer(out_dir: str, worker: str = "worker_0") -> TrialWriter | ProcessTrialWriter:
    """A writer for one worker's out_dir: through the writer process where possible."""
    proc = writer_process()
    if proc is not None:
        try:
            return proc.open_writer(out_dir, worker)
        except WriterProcessError as e:
            logger.warning("smdebug-lite writer process unusable (%s); writing from a thread", e)
    return TrialWriter(out_dir, worker)


def _forget_after_fork() -> None:
    """A forked child (a DataLoader worker, say) starts its own writer process if it writes;
    it closes its copy of the parent's socket so the writer process still sees the parent exit."""
    global _instance
    if _instance is not None:
        try:
            _instance.channel.close()
        except OSError:
            pass
    _instance = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
