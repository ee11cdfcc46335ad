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
  read) and are raised on the next `submit`, as the thread writer does;
- if the writer process dies (killed, out of memory), each writer notices on its next call and
  moves on, with one warning: to a new writer process the first time, to a thread of the
  training process after that. Steps handed over and not yet acknowledged still have their
  data here (their memory is reused only once they are acknowledged), so they are handed over
  again; the new writer leaves alone those the dead one had finished (`StepFiles`, resumed).

`open_trial_writer` picks this where it works (Linux: memfd and fd passing) and falls back to
`TrialWriter` elsewhere, when the process cannot start, or with ``SMDEBUG_WRITER=thread``.
The parent uses no thread of its own: the board is read when the training thread next submits,
allocates or flushes. While steps keep coming, the writer process polls instead of blocking on
the socket (see `writer_process_main`): on a VM, a message that wakes a blocked process cost the
sender tens of microseconds.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import signal
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
from smdebug_lite.writer.step_files import staging_name
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
# How many times a training process starts a new writer process after one died; then a thread.
MAX_RESTARTS = 1
# Writer ids and step tokens, from one counter for all writer processes of this process: a
# token is never reused, so an acknowledgement on one board never stands for a step of another.
_IDS = itertools.count()


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
        self.dead: str | None = None  # why it is gone, once it is
        self._seq = 0  # sequence number of the next message, sent or posted on the ring
        self.waits = WriterWaits(capacity)
        self._ids = _IDS
        self._writers: dict[int, ProcessTrialWriter] = {}
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
        """Note the death; each writer moves on at its next call (`ProcessTrialWriter._recover`)
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

    def take_unwritten(self, wid: int) -> list[StepWriter]:
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

    def open_writer(self, out_dir: str, worker: str) -> ProcessTrialWriter:
        w = ProcessTrialWriter(self, next(self._ids), out_dir, worker)
        self._writers[w.wid] = w
        self.send(("open", w.wid, out_dir, worker, _storage_env()))
        return w

    def adopt(self, w: ProcessTrialWriter) -> None:
        """Open `w`'s out_dir here (under a new id) for a writer whose writer process died."""
        previous = w.wid
        w.wid = wid = next(self._ids)
        self._writers[wid] = w
        self.send(("open", wid, w.out_dir, w.worker, _storage_env(), previous))

    def track(self, sw: StepWriter, keep: list, wid: int) -> int:
        token = sw.token = next(self._ids)
        self._in_flight[token] = (sw, keep, wid)
        return token

    @property
    def pid(self) -> int:
        return self.popen.pid

    def new_token(self) -> int:
        return next(self._ids)


_NAME, _VALUE, _WALL = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _storage_env() -> dict[str, str]:
    """The variables storage reads (S3 endpoint, region, credentials), as they are now: the
    writer process was started earlier and may have an older environment."""
    return {k: v for k, v in os.environ.items() if k.startswith(STORAGE_ENV_PREFIXES)}


class ProcessTrialWriter:
    """`TrialWriter`'s interface over the writer process.

    If the writer process dies, the writer moves on at its next call (`_recover`): to a new
    writer process, or to a `TrialWriter` (a thread) once restarts are used up, handing over
    again the steps the dead one never acknowledged. Nothing of that reaches the hook."""

    def __init__(self, proc: WriterProcess, wid: int, out_dir: str, worker: str) -> None:
        self.proc: WriterProcess | None = proc  # None once writing moved to a thread
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
        self._collections: str | None = None  # the last collections JSON (sent again on recovery)
        self._thread: TrialWriter | None = None  # where writing went after the restarts

    @property
    def total_wait_s(self) -> float:
        if self._thread is not None:
            return self._thread.total_wait_s
        return self.proc.waits.total_s

    @property
    def pid(self) -> int | None:
        """The writer process's pid (None once writing moved to a thread of this process)."""
        return None if self.proc is None else self.proc.pid

    def new_step(self, step: int, mode, mode_step: int) -> StepWriter:
        return StepWriter(step, self.worker, mode, mode_step)

    def submit(self, sw: StepWriter) -> object:
        """Hand a step to the writer process. Returns the template the step now is (its arrays
        and names, which a later `StepWriter.repeat` may refer to), or None."""
        if not len(sw):
            return None
        try:
            return self._submit(sw)
        except WriterProcessError as e:
            self._moved_on(e)  # (hands over again what was tracked, this step included)
            return None if sw.token >= 0 else self.submit(sw)

    def _submit(self, sw: StepWriter) -> object:
        proc = self.proc
        if sw.repeat is not None:
            tmpl, n, wall = sw.repeat
            template = self._slot_of(tmpl)
            if template < 0 or sw._tensors or sw._shapes:
                raise RuntimeError(f"step {sw.step} was submitted as a repeat of a template "
                                   "this writer no longer holds")
            with proc.lock:  # (the acknowledgements and the handover under one lock)
                if not self._raise_if_failed():
                    self._send_again(sw, template, [wall] * n)
                    return tmpl
            _unrepeat(sw)  # (the writer that knew the template died: the step goes in full)
            return self.submit(sw)
        if self._raise_if_failed():
            return self.submit(sw)  # (to where writing moved)
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
            token = proc.track(sw, keep, self.wid)
            self._send(("step", self.wid, token, sw.step, sw.mode.name, sw.mode_step, tensors,
                        shapes, template), poll=False)  # (_raise_if_failed read the board)
        return made

    def _send_again(self, sw: StepWriter, template: int, walls: list[float]) -> None:
        """The step as a repeat of the template in `template`: on the ring if it can go there."""
        proc = self.proc
        with proc.lock:
            token = proc.track(sw, [], self.wid)
            if not (walls.count(walls[0]) == len(walls) and proc.post_again(
                    self.wid, token, sw.step, sw.mode.value, sw.mode_step, walls[0], template)):
                self._send(("again", self.wid, token, sw.step, sw.mode.name, sw.mode_step,
                            walls, template), poll=False)

    def _send_full(self, sw: StepWriter) -> None:
        """A step handed over again after a writer process died: in full, as no template."""
        proc = self.proc
        keep: list = []
        tensors = [(name, proc.describe(value, keep), wall) for name, value, wall in sw._tensors]
        shapes = [(s.name, s.original_name, s.shape) for s in sw._shapes]
        with proc.lock:
            token = proc.track(sw, keep, self.wid)
            proc.send(("step", self.wid, token, sw.step, sw.mode.name, sw.mode_step, tensors,
                       shapes, -1), poll=False)

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
        self._collections = json_text
        if self._thread is not None:
            self._thread.write_collections(json_text)
            return
        try:
            self._send(("collections", self.wid, json_text))
        except WriterProcessError as e:
            self._moved_on(e)  # (which sends the collections again)

    def flush(self) -> None:
        """Block until everything submitted so far is written (and uploaded, for S3)."""
        if self._thread is not None:
            self._thread.flush()
            return
        self._ask("flush", timeout=3600)
        if self._thread is not None:  # (the writer process died meanwhile)
            self._thread.flush()
            return
        self._raise_if_failed()

    def close(self, mark_training_end: bool | None = None) -> None:
        """Flush, then write `training_job_end.ts` (not on SageMaker, where the platform does)."""
        if self._closed:
            return
        self._closed = True
        self._templates = [None, None]
        if mark_training_end is None:
            mark_training_end = not on_sagemaker()
        if self._thread is None:
            self._ask("close", timeout=3600, extra=(bool(mark_training_end),))
        if self._thread is not None:  # (also when the writer process died during the close)
            self._thread.close(mark_training_end)
            if self.error is not None:
                raise WriteFailed(f"writing to {self.out_dir} failed: {self.error}")
            return
        self.proc._writers.pop(self.wid, None)
        self.proc.waits.log_total()
        self._raise_if_failed()

    def _ask(self, kind: str, timeout: float, extra: tuple = ()) -> None:
        if self.error is not None and kind == "flush":
            return
        proc = self.proc
        token = proc.new_token()
        try:
            proc.send((kind, self.wid, token, *extra))
            reply = proc.wait_reply(token, timeout)
        except WriterProcessError as e:
            if proc.dead and self.error is None:
                self._recover()
                if self._thread is None:
                    self._ask(kind, timeout, extra)  # (of the new writer process)
                return
            self.error = self.error or e
            return
        if reply[2] is not None and self.error is None:
            self.error = WriterProcessError(reply[2])

    def _send(self, msg: tuple, poll: bool = True) -> None:
        self.proc.send(msg, poll=poll)

    def _moved_on(self, e: WriterProcessError) -> None:
        """After a failed send: a dead writer process is replaced (`_recover`); anything else
        is this writer's failure."""
        if self.proc is not None and self.proc.dead and self.error is None:
            self._recover()
            return
        self.error = self.error or e
        raise WriteFailed(f"writing to {self.out_dir} failed: {e}") from e

    def _raise_if_failed(self) -> bool:
        """Raise the writer's error; True when the writer process was found dead and writing
        just moved elsewhere (`_recover`)."""
        if self.error is None:
            proc = self.proc
            proc.poll()
            if proc.dead:
                self._recover()
                return True
        if self.error is not None:
            raise WriteFailed(f"writing to {self.out_dir} failed: {self.error}") from self.error
        return False

    # -- when the writer process dies ----------------------------------------------------------

    def _recover(self) -> None:
        """Move to a new writer process (or a thread once restarts are used up) and hand over
        again the steps the dead one did not acknowledge; one warning says what happened."""
        dead = self.proc
        cause = dead.dead
        unwritten = dead.take_unwritten(self.wid)
        dead._writers.pop(self.wid, None)
        self._templates = [None, None]
        self._next_template = 0
        for sw in unwritten:
            _unrepeat(sw)
        steps = [sw.step for sw in unwritten]
        where = None
        new = _replacement_for(dead)
        while new is not None:  # (once, unless the new one dies too)
            sent = 0
            try:
                self.proc = new
                new.adopt(self)
                if self._collections is not None:
                    new.send(("collections", self.wid, self._collections))
                for sw in unwritten:
                    self._send_full(sw)
                    sent += 1
                where = f"a new writer process (pid {new.pid})"
                break
            except WriterProcessError:
                if not new.dead:
                    raise
                # What it did not acknowledge, then what it was never sent.
                left = new.take_unwritten(self.wid)
                seen = set(map(id, left))
                unwritten = left + [sw for sw in unwritten[sent:] if id(sw) not in seen]
                new._writers.pop(self.wid, None)
                new = _replacement_for(new)
        lost: list[int] = []
        if where is None:
            where = "a thread of the training process"
            self.proc = None
            self._thread = TrialWriter(self.out_dir, self.worker, resumed=True,
                                       previous_staging=staging_name(os.getpid(), self.wid))
            self.submit = self._submit_to_thread  # type: ignore[method-assign]
            if self._collections is not None:
                self._thread.write_collections(self._collections)
            for sw in unwritten:
                try:
                    self._thread.submit(sw)
                except WriteFailed as e:
                    self.error = e
                    lost = [s.step for s in unwritten[unwritten.index(sw):]]
                    break
        handed = [s for s in steps if s not in lost]
        again = (f"handed over again {_step_list(handed)}, which it had not acknowledged"
                 if handed else "no step was waiting to be written")
        loss = (f"{_step_list(lost)} LOST (the new writer failed too: {self.error})"
                if lost else "no step is lost")
        logger.warning("%s; %s goes on writing %s: %s, %s", cause, where, self.out_dir, again,
                       loss)

    def _submit_to_thread(self, sw: StepWriter) -> object:
        """`submit` once writing moved to a thread: steps go in full, and are no template."""
        if len(sw):
            _unrepeat(sw)
            self._thread.submit(sw)
        return None


def _unrepeat(sw: StepWriter) -> None:
    """Give a repeat step its tensors back (the template's arrays, which hold its values until
    it is written): for a writer that does not know the template."""
    if sw.repeat is not None:
        (values, names), n, wall = sw.repeat
        sw._tensors = list(zip(names, values, [wall] * n, strict=True))
        sw.repeat = None


def _step_list(steps: list[int]) -> str:
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))


# -- choosing a writer ---------------------------------------------------------------------------

_instance: WriterProcess | None = None
_unavailable: str | None = None
_restarts = 0  # writer processes started because one died
_warned_choices: set[str] = set()
_start_lock = threading.Lock()


def writer_process() -> WriterProcess | None:
    """This process's writer process, started on first use; None where writes stay in-process."""
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
        return _start_unless_usable()


def _replacement_for(dead: WriterProcess) -> WriterProcess | None:
    """The writer process to use instead of `dead`: the current one if it is alive (another
    writer may have started it already), a new one while restarts are left, else None."""
    if os.environ.get("SMDEBUG_WRITER", "process").strip().lower() == "thread":
        return None
    with _start_lock:
        if _instance is not dead and _usable(_instance):
            return _instance
        return _start_unless_usable()


def _start_unless_usable() -> WriterProcess | None:
    """(Under `_start_lock`.) The live writer process, else a new one if this process may
    start one: once, plus `MAX_RESTARTS` after deaths."""
    global _instance, _unavailable, _restarts
    if _usable(_instance):
        return _instance
    if _unavailable is not None:
        return None
    if not shared_memory_supported() or not hasattr(socket, "send_fds"):
        _unavailable = "no memfd or fd passing on this platform"
        return None
    restart = _instance is not None and _instance.pid_owner == os.getpid()
    if restart:
        if _restarts >= MAX_RESTARTS:
            _unavailable = f"{_instance.dead}, after {_restarts} restart(s)"
            return None
        _restarts += 1
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
    global _instance, _restarts
    if _instance is not None:
        try:
            _instance.channel.close()
        except OSError:
            pass
    _instance = None
    _restarts = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
