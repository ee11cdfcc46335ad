"""`ProcessTrialWriter`: one worker's out_dir written by the writer process (`handle`).

If the writer process dies (killed, out of memory), the writer notices on its next call and
moves on, with one warning: to a new writer process the first time, to a thread of the
training process (`ThreadTrialWriter`) after that. Steps handed over and not yet acknowledged
are handed over again; the new writer leaves alone those the dead one had finished
(`StepFileWriter`, resumed).
"""

from __future__ import annotations

import operator
import os

from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage
from smdebug_lite.writer.pending_step import PendingStep
from smdebug_lite.writer.process.handle import WriterProcess, WriterProcessError
from smdebug_lite.writer.protocol import on_sagemaker
from smdebug_lite.writer.step_file_writer import staging_name
from smdebug_lite.writer.thread_writer import ThreadTrialWriter
from smdebug_lite.writer.write_failed import WriteFailed

logger = get_logger(__name__)

_NAME, _VALUE, _WALL = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


class ProcessTrialWriter:
    """The `TrialWriter` protocol over the writer process; opens `out_dir` there.

    If the writer process dies, the writer moves on at its next call (`_recover`): to a new
    writer process, or to a `ThreadTrialWriter` once restarts are used up, handing over again
    the steps the dead one never acknowledged. Nothing of that reaches the hook."""

    def __init__(self, proc: WriterProcess, out_dir: str, worker: str = "worker_0",
                 chief: bool = False, storage: Storage | None = None) -> None:
        """`chief`: the chief worker's writer (see `StepFileWriter`); `storage`: the out_dir's,
        if the caller holds it, for writing from a thread after the writer process is gone."""
        self.proc: WriterProcess | None = proc  # None once writing moved to a thread
        self.out_dir = out_dir
        self.storage = storage
        self.worker = worker
        self.chief = chief
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
        self._thread: ThreadTrialWriter | None = None  # where writing went after the restarts
        self.wid = proc.open(self)  # (the writer process tells writers apart by this id)

    @property
    def total_wait_s(self) -> float:
        if self._thread is not None:
            return self._thread.total_wait_s
        return self.proc.waits.total_s

    @property
    def pid(self) -> int | None:
        """The writer process's pid (None once writing moved to a thread of this process)."""
        return None if self.proc is None else self.proc.pid

    def new_step(self, step: int, mode, mode_step: int) -> PendingStep:
        return PendingStep(step, self.worker, mode, mode_step)

    def submit(self, sw: PendingStep) -> object:
        """Hand a step to the writer process. Returns the template the step now is (its arrays
        and names, which a later `PendingStep.repeat` may refer to), or None."""
        repeat = sw.repeat
        if repeat is not None and repeat[1] and self.error is None:
            # The steady case (a step replaying a template, posted on the ring) in one call.
            tmpl = repeat[0]
            templates = self._templates
            slot = 0 if templates[0] is tmpl else 1 if templates[1] is tmpl else -1
            if (slot >= 0 and not sw.tensors and not sw.shapes
                    and self.proc.post_repeat(self.wid, sw, slot)):
                return tmpl
        if not len(sw):
            return None
        try:
            return self._submit(sw)
        except WriterProcessError as e:
            self._moved_on(e)  # (hands over again what was tracked, this step included)
            return None if sw.token >= 0 else self.submit(sw)

    def _submit(self, sw: PendingStep) -> object:
        proc = self.proc
        if sw.repeat is not None:
            tmpl, n, wall = sw.repeat
            template = self._slot_of(tmpl)
            if template < 0 or sw.tensors or sw.shapes:
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
        entries = sw.tensors
        values = list(map(_VALUE, entries))
        names = list(map(_NAME, entries))
        template = -1 if sw.shapes else self._template_of(values, names)
        if template >= 0:
            self._send_again(sw, template, list(map(_WALL, entries)))
            return self._templates[template]
        keep: list = []
        describe = proc.describe
        tensors = [(name, describe(value, keep), wall) for name, value, wall in entries]
        shapes = [(s.name, s.original_name, s.shape) for s in sw.shapes]
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

    def _send_again(self, sw: PendingStep, template: int, walls: list[float]) -> None:
        """The step as a repeat of the template in `template`: on the ring if it can go there."""
        proc = self.proc
        with proc.lock:
            token = proc.track(sw, [], self.wid)
            if not (walls.count(walls[0]) == len(walls) and proc.post_again(
                    self.wid, token, sw.step, sw.mode.value, sw.mode_step, walls[0], template)):
                self._send(("again", self.wid, token, sw.step, sw.mode.name, sw.mode_step,
                            walls, template), poll=False)

    def _send_full(self, sw: PendingStep) -> None:
        """A step handed over again after a writer process died: in full, as no template."""
        proc = self.proc
        keep: list = []
        tensors = [(name, proc.describe(value, keep), wall) for name, value, wall in sw.tensors]
        shapes = [(s.name, s.original_name, s.shape) for s in sw.shapes]
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
        self.proc.forget(self.wid)
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
        dead.forget(self.wid)
        self._templates = [None, None]
        self._next_template = 0
        for sw in unwritten:
            _unrepeat(sw)
        steps = [sw.step for sw in unwritten]
        where = None
        new = dead.replacement()
        while new is not None:  # (once, unless the new one dies too)
            sent = 0
            try:
                self.proc = new
                self.wid = new.open(self, previous=self.wid)
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
                new.forget(self.wid)
                new = new.replacement()
        lost: list[int] = []
        if where is None:
            where = "a thread of the training process"
            self.proc = None
            self._thread = ThreadTrialWriter(
                self.out_dir, self.worker, resumed=True,
                previous_staging=staging_name(os.getpid(), self.wid), chief=self.chief,
                storage=self.storage)
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

    def _submit_to_thread(self, sw: PendingStep) -> object:
        """`submit` once writing moved to a thread: steps go in full, and are no template."""
        if len(sw):
            _unrepeat(sw)
            self._thread.submit(sw)
        return None


def _unrepeat(sw: PendingStep) -> None:
    """Give a repeat step its tensors back (the template's arrays, which hold its values until
    it is written): for a writer that does not know the template."""
    if sw.repeat is not None:
        (values, names), n, wall = sw.repeat
        sw.tensors = list(zip(names, values, [wall] * n, strict=True))
        sw.repeat = None


def _step_list(steps: list[int]) -> str:
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps))
