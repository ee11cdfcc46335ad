"""A saving step's captures, kept so that the next saving step like it can be replayed.

Most saving steps repeat the last one: the same parameters, the same loss, the same gradients,
into the same pooled shared-memory buffers, which the writer process already knows (the step
goes over as "again", see `writer_process`). The generic capture path still works all of that
out again, tensor by tensor; on the training thread, between torch kernels, that Python costs
more than the copies themselves. A `StepRecord` keeps what a completed step did, call by call
(which batch of tensors, copied into which buffers), so that a replayed step only checks that
each call and each tensor's shape, dtype and layout are what they were, and copies.

Scalars saved in a saving step (`Hook.save_scalar` with a float) are captured into a pooled
buffer too, and replayed by storing the new value. Anything else (another tensor, another
order, a second backward pass, a buffer the writer has not finished with) ends the replay: what it captured so far becomes ordinary
captures, and the step carries on through the generic path, which is always correct.

The record owns its buffers while it is the hook's record; dropped, it gives them back to the
pools once the writer no longer needs them.
"""

from __future__ import annotations

import operator
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# (shape, dtype, layout) of a source tensor: what a copy into the recorded buffer needs equal.
SIGNATURE = operator.attrgetter("shape", "dtype", "layout")

MANY, GRADS, ONE, VALUE = 0, 1, 2, 3  # kinds of capture calls (see `RecordedCall.key`)


@dataclass(slots=True)
class RecordedCall:
    """One capture call of the recorded step and the buffers its tensors went into.

    `key` says which call it was: for MANY, the list of (plan, tensor) pairs (the same list
    object, a hook's cached one, so its tensors are the same ones: `srcs`); for GRADS, the
    gradient names in the order their hooks fired; for ONE, the plan (plans are cached per set
    of saving collections, so the same plan is the same object); for VALUE (a scalar), the
    hook's plan of the scalar's name, and `dsts` holds the numpy view its value is stored in."""

    kind: int
    key: object
    start: int  # index of its first item in the step
    end: int
    replace: bool  # captured with `replace` (gradients: a later pass takes their place)
    sigs: list
    dsts: list  # the buffers (tensors; for VALUE, a numpy view)
    srcs: list[torch.Tensor] | None = None


class StepRecord:
    """What a completed saving step captured: its calls, its items, its buffers.

    Several steps may use the buffers in turn: each one once the writer has written the one
    before (`ready`). `pending` counts those submitted whose acknowledgement has not yet been
    handled; a record that is dropped gives its buffers back to the pools when it reaches 0."""

    def __init__(self, calls: list[RecordedCall], items: list[tuple], entries: list,
                 give_back: Callable[[Sequence], None], lock: threading.Lock) -> None:
        self.calls = calls
        self.items = items  # (plan, numpy view of the buffer, no reductions, shape)
        self.entries = entries  # the pooled buffers, in item order
        self.size = len(items)
        self.template: object = None  # the writer's template these buffers are (`adopt`)
        self.writer: object = None
        self.board: object = None  # the writer process's AckBoard
        self.plan_cache: dict | None = None
        self.token = -1  # the writer's token of the last step that used the buffers
        self._pending = 0
        self._give_back = give_back
        self._lock = lock
        self._dropped = False
        self._owned = True  # False once the buffers belong to a step (`hand_over`)

    # -- life cycle (`written` runs on whichever thread reads the writer's acknowledgements) --

    def used_by(self, token: int) -> None:
        """A step in these buffers was submitted under `token`."""
        with self._lock:
            self.token = token
            self._pending += 1

    def written(self) -> None:
        """A step that used the buffers is written."""
        with self._lock:
            self._pending -= 1
            if not (self._dropped and self._owned and self._pending == 0):
                return
        self._give_back(self.entries)

    def adopt(self, template: object, writer: object) -> bool:
        """The writer holds the recorded step as `template`: later steps may repeat it, once
        the writer process has acknowledged them (False: no writer process, no repeats)."""
        proc = getattr(writer, "proc", None)
        if proc is None:
            return False
        self.template, self.writer, self.board = template, writer, proc.board
        return True

    def repeatable_by(self, writer: object) -> bool:
        """Whether `writer` is the one that wrote the record and still holds its template, so
        that a step replaying it can go over as a repeat."""
        return writer is self.writer and writer is not None and writer.holds(self.template)

    def repeat_as(self, sw) -> None:
        """Make `sw` (a step that replayed the record, with nothing else) a repeat of its
        template; the buffers are the record's again once the writer has written it."""
        sw.repeat = (self.template, self.size, time.time())
        sw.on_written = self.written

    def ready(self) -> bool:
        """Whether the writer has written every step that used the buffers (the board's
        acknowledgement, read directly: the callbacks may not have run yet)."""
        return self.board is not None and self.board.done >= self.token

    def drop(self) -> None:
        """No longer the hook's record: the buffers go back to the pools once written."""
        with self._lock:
            if self._dropped:
                return
            self._dropped = True
            if not (self._owned and self._pending == 0):
                return
        self._give_back(self.entries)

    def hand_over(self, upto: int) -> list:
        """Give the buffers up (while `ready`): the first `upto` now belong to the step being
        captured (the pools get them back when it is written); the others go back now."""
        with self._lock:
            self._dropped = True
            self._owned = False
        rest = self.entries[upto:]
        if rest:
            self._give_back(rest)
        return self.entries[:upto]

    # -- replaying ------------------------------------------------------------------------

    def replay_many(self, pos: int, key: object, srcs: Sequence[torch.Tensor] | None) -> bool:
        """The call at `pos` again, if it is the same call with tensors like the recorded ones:
        copy them into the recorded buffers. `srcs` None: the recorded call's own tensors."""
        if pos >= len(self.calls):
            return False
        call = self.calls[pos]
        if call.kind == MANY:
            if call.key is not key:
                return False
            srcs = call.srcs
        elif call.kind != GRADS or call.key != key:
            return False
        if list(map(SIGNATURE, srcs)) != call.sigs:
            return False
        # (parameters require grad: the copy must not be recorded by autograd; a context
        # manager costs several Python calls, on the training thread)
        grad_mode = _is_grad_enabled()
        _set_grad_enabled(False)
        try:
            copy_all(call.dsts, srcs)
        finally:
            _set_grad_enabled(grad_mode)
        return True

    def replay_one(self, pos: int, plan: object, tensor: torch.Tensor, replace: bool) -> bool:
        if pos >= len(self.calls):
            return False
        call = self.calls[pos]
        if (call.kind != ONE or call.key is not plan or call.replace != replace
                or [SIGNATURE(tensor)] != call.sigs):
            return False
        if tensor.is_cpu and tensor.numel() == 1:
            # A loss or a metric: its number, stored into the buffer's numpy view, is exact
            # for every pooled dtype and costs far less than a tensor copy.
            self.items[call.start][1][...] = tensor.item()
            return True
        if tensor.is_neg():
            return False
        call.dsts[0].copy_(tensor.detach())
        return True


    def replay_value(self, pos: int, plan: object, value: float) -> bool:
        if pos >= len(self.calls):
            return False
        call = self.calls[pos]
        if call.kind != VALUE or call.key is not plan:
            return False
        call.dsts[0][0] = value
        return True


_is_grad_enabled = torch.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled


def _copy_each(dsts: list[torch.Tensor], srcs: Sequence[torch.Tensor]) -> None:
    for d, s in zip(dsts, srcs, strict=True):
        d.copy_(s)


# One call copies a list of tensors (a loop in C++ on CPU); older torch has no such op.
copy_all = getattr(torch, "_foreach_copy_", None) or _copy_each

__all__ = ["GRADS", "MANY", "ONE", "SIGNATURE", "VALUE", "RecordedCall", "StepRecord", "copy_all"]
