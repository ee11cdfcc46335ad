"""The writer process's program: `main(<socket fd>)`.

`handle.WriterProcess` starts it in a new interpreter (``python -c`` with a bootstrap that
imports this same copy of smdebug_lite). It writes the steps a training process describes, in
order, and posts each one done on the shared ack board. It ignores Ctrl-C and SIGTERM (the
training process decides when writing ends: on SIGTERM it closes its hooks through this
process) and exits when the training process closes the socket, after writing everything it
received and finishing S3 uploads. It never writes `training_job_end.ts` on its own: only a
`close` asks.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import sys
import time
import traceback

import numpy as np

from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer.pending_step import PendingStep
from smdebug_lite.writer.process.ack_board import AckBoard
from smdebug_lite.writer.process.channel import STORAGE_ENV_PREFIXES, Channel, ChannelClosed
from smdebug_lite.writer.process.shared_arena import SegmentMaps
from smdebug_lite.writer.step_file_writer import StepFileWriter, staging_name

# While steps keep coming, the loop sleeps between non-blocking reads instead of blocking on the
# socket. A process blocked on the socket is woken by every message the trainer sends and by
# every reply the trainer reads (the socket's wait queue), and on a VM each such wake-up costs
# the trainer tens of microseconds in the system call; a sleeping poller costs it nothing.
# After a quiet spell the loop blocks again, so an idle writer process does not wake up at all.
POLL_INTERVAL_S = 0.001
POLL_WHILE_ACTIVE_S = 2.0
# A blocked loop still looks at the ring this often: an entry posted just as it stopped polling
# waits at most this long.
IDLE_RING_CHECK_S = 1.0


def _describe_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class WriterLoop:
    """Runs the messages of one training process, in the order it made them."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.maps = SegmentMaps()
        self.files: dict[int, StepFileWriter] = {}
        self.failed: dict[int, str] = {}
        self.parent_gone = False
        self.board: AckBoard | None = None
        # (writer, template slot) -> a step sent in full that repeat steps refer to
        self.templates: dict[tuple[int, int], list] = {}
        self.expected = 0  # sequence number of the next message to run
        self.held: dict[int, tuple] = {}  # socket messages that came before their turn
        self.ring: collections.deque[tuple] = collections.deque()  # ring entries not yet run

    def reply(self, msg: tuple) -> None:
        """Answer the training process; once it is gone, keep writing what it sent."""
        if not self.parent_gone:
            try:
                self.channel.send(msg)
            except ChannelClosed:
                self.parent_gone = True

    def run(self) -> None:
        self.reply(("ready", os.getpid()))
        last_message = time.monotonic()
        while True:
            polling = time.monotonic() - last_message < POLL_WHILE_ACTIVE_S
            try:
                if polling:
                    msgs = self.channel.recv_available(0)
                else:
                    msg = self.channel.recv(IDLE_RING_CHECK_S)
                    msgs = [] if msg is None else [msg]
            except ChannelClosed:
                break
            if self._run_in_order(msgs):
                last_message = time.monotonic()
                if self.board is not None:
                    self.board.post_active_until(last_message + POLL_WHILE_ACTIVE_S)
            elif polling:
                time.sleep(POLL_INTERVAL_S)
        # The training process is gone: write what it posted (a message it did not finish
        # sending leaves a gap in the order, which must not hold back the steps after it).
        self._run_in_order([], gaps_allowed=True)
        for files in self.files.values():  # finish uploads only
            try:
                files.finish(mark_training_end=False)
            except Exception:
                traceback.print_exc()

    def _run_in_order(self, msgs: list[tuple], gaps_allowed: bool = False) -> bool:
        """Run socket messages and ring entries (see `AckBoard`) by their sequence numbers;
        what comes early waits for the ones before it. True when anything ran."""
        held = self.held
        for msg in msgs:
            held[msg[0]] = msg[1:]
        ring = self.ring
        if self.board is not None:
            ring.extend(self.board.take_again())
        ran = False
        while True:
            seq = self.expected
            msg = held.pop(seq, None)
            if msg is None and ring and ring[0][0] <= seq:
                msg = ("again_one", *ring.popleft()[1:])
            if msg is None:
                if not gaps_allowed or not (held or ring):
                    return ran
                self.expected = min([*held, *(e[0] for e in ring)])
                continue
            self.expected = seq + 1
            ran = True
            try:
                getattr(self, "on_" + msg[0])(*msg[1:])
            except Exception:  # a bug here must not stop the writing of later steps
                traceback.print_exc()

    # -- messages --------------------------------------------------------------------------

    def on_board(self, size: int) -> None:
        self.board = AckBoard.attach(self.channel.take_fd(), size)

    def on_segment(self, seg_id: int, size: int) -> None:
        self.maps.add(seg_id, self.channel.take_fd(), size)

    def on_drop(self, seg_id: int) -> None:
        self.maps.drop(seg_id)

    def on_open(self, wid: int, out_dir: str, worker: str, env: dict[str, str],
                previous: int | None = None, chief: bool = False) -> None:
        """`previous`: the id this writer had in a writer process that died, whose work this
        process takes over; `chief`: the chief worker's writer (see `StepFileWriter`)."""
        for key in [k for k in os.environ if k.startswith(STORAGE_ENV_PREFIXES) and k not in env]:
            del os.environ[key]
        os.environ.update(env)
        try:
            owner = os.getppid()  # (the training process)
            self.files[wid] = StepFileWriter(
                out_dir, worker, resumed=previous is not None,
                staging_prefix=staging_name(owner, wid),
                previous_staging=None if previous is None else staging_name(owner, previous),
                chief=chief)
        except Exception as e:
            self._fail(wid, e)

    def on_again(self, wid: int, token: int, step: int, mode: str, mode_step: int,
                 walls: list[float], template: int = 0) -> None:
        """A step whose tensors lie where those of a full step did, under the same names."""
        last = self.templates.get((wid, template), [])
        if len(last) != len(walls):  # (a protocol error: the trainer keeps the same templates)
            self._fail(wid, RuntimeError(f"step {step} was sent as the repeat of a step of "
                                         f"{len(walls)} tensors, but the last one had {len(last)}"))
            self.board.post_done(token)
            return
        tensors = [(name, where, wall) for (name, where, _), wall in zip(last, walls, strict=True)]
        self._write(wid, token, step, mode, mode_step, tensors, [])

    def on_again_one(self, wid: int, token: int, step: int, mode: int, mode_step: int,
                     wall: float, template: int) -> None:
        """A repeat step from the ring: every tensor has the same wall time."""
        walls = [wall] * len(self.templates.get((wid, template), ()))
        self.on_again(wid, token, step, ModeKeys(mode).name, mode_step, walls or [wall], template)

    def on_step(self, wid: int, token: int, step: int, mode: str, mode_step: int,
                tensors: list, shapes: list, template: int = -1) -> None:
        """A step in full; with a template slot >= 0, later repeat steps may refer to it."""
        if template >= 0:
            self.templates[(wid, template)] = tensors
        self._write(wid, token, step, mode, mode_step, tensors, shapes)

    def _write(self, wid: int, token: int, step: int, mode: str, mode_step: int,
               tensors: list, shapes: list) -> None:
        if wid in self.files and wid not in self.failed:
            try:
                sw = PendingStep(step, self.files[wid].worker, ModeKeys[mode], mode_step)
                for name, where, wall_time in tensors:
                    sw.add_tensor(name, self._array(where), wall_time)
                for name, original_name, shape in shapes:
                    sw.add_shape(name, shape, original_name)
                self.files[wid].write_step(sw)
                del sw
                self._check_uploads(wid)
            except Exception as e:
                self._fail(wid, e)
        self.board.post_done(token)

    def on_collections(self, wid: int, json_text: str) -> None:
        if wid in self.files and wid not in self.failed:
            try:
                self.files[wid].write_collections(json_text)
            except Exception as e:
                self._fail(wid, e)

    def on_flush(self, wid: int, token: int) -> None:
        files = self.files.get(wid)
        if files is not None and wid not in self.failed:
            files.wait_uploads()
            self._check_uploads(wid)
        self.reply(("flushed", token, self.failed.get(wid)))

    def on_close(self, wid: int, token: int, mark_training_end: bool) -> None:
        for key in [k for k in self.templates if k[0] == wid]:
            del self.templates[key]
        files = self.files.pop(wid, None)
        if files is not None:
            try:
                files.finish(mark_training_end and wid not in self.failed)
                self._check_uploads(wid, files)
            except Exception as e:
                self._fail(wid, e)
        self.reply(("closed", token, self.failed.pop(wid, None)))

    # -- helpers ---------------------------------------------------------------------------

    def _array(self, where: tuple) -> np.ndarray:
        kind = where[0]
        if kind == "shm":
            _, seg_id, offset, dtype, shape = where
            return self.maps.array(seg_id, offset, dtype, shape)
        if kind == "inline":
            _, data, dtype, shape = where
            return np.frombuffer(data, dtype).reshape(shape)
        return where[1]

    def _check_uploads(self, wid: int, files: StepFileWriter | None = None) -> None:
        files = files or self.files.get(wid)
        if files is not None and files.upload_error is not None:
            self._fail(wid, files.upload_error)

    def _fail(self, wid: int, e: BaseException) -> None:
        if wid not in self.failed:
            self.failed[wid] = _describe_error(e)
            self.reply(("error", wid, self.failed[wid]))
            if self.board is not None:
                self.board.count_error()  # after the message: the trainer reads it when it sees this


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The library logs to stdout, which this process has none of: what it logs (a compaction
    # that stopped, an upload retried) goes to the training process's stderr instead.
    os.dup2(2, 1)
    sock = socket.socket(fileno=int(argv[0]))
    WriterLoop(Channel(sock)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
