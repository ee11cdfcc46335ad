"""From torch tensors to what the writer takes: private host copies and batched reductions.

Raw values are copied the moment they are seen (the optimizer updates parameters in place, and
``inplace=True`` activations overwrite module outputs). Reductions are computed at once too, as
0-d tensors on the tensor's own device, but they reach the host only when the step ends: all of a
step's reductions are stacked and moved with one transfer per device, so a GPU run pays one
synchronisation per saved step instead of one per tensor.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import torch

from smdebug_lite.hooks.core import TensorPlan
from smdebug_lite.pytorch.reductions import reduce_tensor
from smdebug_lite.pytorch.sharded import full_reductions, full_value, is_dtensor
from smdebug_lite.pytorch.step_record import (
    GRADS,
    MANY,
    ONE,
    SIGNATURE,
    VALUE,
    RecordedCall,
    StepRecord,
)
from smdebug_lite.pytorch.step_record import copy_all as _copy_all

# dtypes numpy has no native type for: reinterpret the bits as an integer of the same width and
# view them as the matching ml_dtypes type, which is exact.
_BIT_VIEWS: dict[torch.dtype, tuple[torch.dtype, np.dtype]] = {torch.bfloat16: (torch.int16, np.dtype(ml_dtypes.bfloat16))}
for _torch_name, _np_name in (
    ("float8_e4m3fn", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e5m2"),
    ("float8_e4m3fnuz", "float8_e4m3fnuz"),
    ("float8_e5m2fnuz", "float8_e5m2fnuz"),
    ("float8_e8m0fnu", "float8_e8m0fnu"),
):
    if hasattr(torch, _torch_name) and hasattr(ml_dtypes, _np_name):
        _BIT_VIEWS[getattr(torch, _torch_name)] = (torch.uint8, np.dtype(getattr(ml_dtypes, _np_name)))


# Dtypes numpy views as they are: their snapshots are copied into reused host buffers.
_POOLED = frozenset({torch.float64, torch.float32, torch.float16, torch.int64, torch.int32,
                     torch.int16, torch.int8, torch.uint8, torch.bool})
_STRIDED = torch.strided
_PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})  # others may be DTensors
_NUMPY_DTYPES = {t: torch.empty(0, dtype=t).numpy().dtype for t in _POOLED}
_SCALAR_LIKE = torch.empty(1, dtype=torch.float64)  # what a saved Python float is stored as


def cpu_tensor_to_numpy(t: torch.Tensor) -> np.ndarray:
    """numpy view of a CPU tensor the caller owns (exact for bfloat16 and float8 types)."""
    view = _BIT_VIEWS.get(t.dtype)
    if view is not None:
        return t.view(view[0]).numpy().view(view[1])
    if t.dtype == torch.complex32:
        return t.to(torch.complex64).numpy()
    return t.numpy()


def _plain(t: torch.Tensor) -> torch.Tensor:
    """Detached, dense, dequantized, with lazy conjugate/negative views resolved."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if t.is_complex() and t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


def _copy_plain(t: torch.Tensor) -> np.ndarray:
    return cpu_tensor_to_numpy(t.to("cpu", copy=True, memory_format=torch.contiguous_format))


def host_copy(t: torch.Tensor) -> np.ndarray:
    """A private, C-contiguous host copy of `t` as numpy."""
    return _copy_plain(_plain(t))


Buffer = tuple["_Slot", torch.Tensor, np.ndarray]  # (its pool, host tensor, numpy view of it)
_NONE: list = []  # (shared, never appended to)


class HostBuffers:
    """Host buffers that raw snapshots are copied into, reused once the writer has written them.

    A fresh host allocation per saved tensor costs more than the copy: large blocks come from
    the OS as untouched pages, and each page faults on first write. Buffers taken for a step
    come back through `give_back` (called once the writer has written the step); a buffer
    never given back (dry run, a failed writer) is simply freed. The pool keeps, per shape and
    dtype, twice what one step took (a step being written while the next one captures), so a
    model with many layers of one shape never reallocates. CUDA tensors are copied into
    page-locked buffers, which the device copies into faster.

    With a writer process (`writer_process` set), CPU snapshots are taken in its shared memory
    instead, and pooled the same way: the writer process reads them in place, and a pooled
    buffer's place in shared memory is known, so handing a step over costs no copy and no lookup.

    A buffer is made once as (its pool slot, tensor, numpy view of it): the numpy array is what
    the writer gets, and giving it back needs no lookup.
    """

    def __init__(self) -> None:
        self.writer_process = None  # a WriterProcess: CPU snapshots go to its shared memory
        self._slots: dict[tuple, _Slot] = {}
        self._touched: list[_Slot] = []  # slots taken from during this step
        self._lock = threading.Lock()

    @property
    def lock(self) -> threading.Lock:
        """Held while the pools change (a record shares it to give its buffers back)."""
        return self._lock

    def take(self, like: torch.Tensor) -> Buffer:
        pinned = like.is_cuda
        proc = self.writer_process
        shared = proc is not None and not pinned
        # (the writer process is part of the key: buffers of another kind, given back late, are
        # never taken for this one)
        key = (like.shape, like.dtype, pinned, proc if shared else None)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        if not slot.taken:
            self._touched.append(slot)
        slot.taken += 1
        with self._lock:
            if slot.free:
                return slot.free.pop()
        if shared and proc.poll():  # steps written since the last look give their buffers back
            with self._lock:
                if slot.free:
                    return slot.free.pop()
        if shared:
            arr = proc.shared_array(_NUMPY_DTYPES[like.dtype], key[0])
            return slot, torch.from_numpy(arr), arr
        buf = torch.empty(key[0], dtype=like.dtype, pin_memory=pinned)
        return slot, buf, buf.numpy()

    def take_many(self, likes: Sequence[torch.Tensor]) -> list[Buffer]:
        """`take` for several tensors at once: the same buffers, in order, with one lock."""
        proc = self.writer_process
        if proc is not None and not self._touched:
            # At a step's first batch, steps written since the last look give their buffers
            # back first: the pools are stacks, so the buffers of the step written last are
            # taken again, and a step in the same buffers as one before goes over in short.
            proc.poll()
        slots, touched = self._slots, self._touched
        out: list[Buffer | None] = []
        later: list[int] = []  # CUDA tensors, and pools with nothing free: `take` deals with them
        with self._lock:
            for t in likes:
                # (the key `take` makes for a CPU tensor)
                slot = None if t.is_cuda else slots.get((t.shape, t.dtype, False, proc))
                if slot is None or not slot.free:
                    later.append(len(out))
                    out.append(None)
                    continue
                if not slot.taken:
                    touched.append(slot)
                slot.taken += 1
                out.append(slot.free.pop())
        for i in later:  # (rare in a steady run: buffers are back by the next saved step)
            out[i] = self.take(likes[i])
        return out  # type: ignore[return-value]

    def end_step(self) -> None:
        """A step's captures are done: grow what the pool keeps to twice that step's use."""
        if self._touched:
            with self._lock:
                for slot in self._touched:
                    slot.keep = max(slot.keep, 2 * slot.taken)
                    slot.taken = 0
            self._touched = []

    def give_back(self, buffers: Sequence[Buffer]) -> None:
        with self._lock:
            # Reversed, so that the next step pops them in the order this one took them: each
            # tensor lands in the same buffer as before (the writer process knows its place).
            for entry in reversed(buffers):
                free = entry[0].free
                if len(free) < entry[0].keep:
                    free.append(entry)


class _Slot:
    """The pool for one shape, dtype and kind of memory."""

    __slots__ = ("free", "keep", "taken")

    def __init__(self) -> None:
        self.free: list[Buffer] = []
        self.keep = 0  # how many free buffers are worth keeping
        self.taken = 0  # buffers taken during this step


class StepBuffer:
    """What one step captured, in capture order, until the step ends.

    It also notes each capture call, so that a completed step can become the `record` that the
    next saving step like it replays (see `step_record`)."""

    __slots__ = ("_items", "_replaceable", "buffers", "_taken", "_calls", "_recordable", "record",
                 "_replay", "_pos")

    def __init__(self) -> None:
        self._items: list[tuple] = []  # (plan, raw copy, reductions, shape)
        self._replaceable: dict[str, int] = {}
        self.buffers = HostBuffers()
        self._taken: list[Buffer] = []
        self._calls: list[RecordedCall] = []  # this step's capture calls, while it can be recorded
        self._recordable = True
        self.record: StepRecord | None = None  # the hook's record (see `take_record`)
        self._replay: StepRecord | None = None  # the record this step replays, call by call
        self._pos = 0  # its next call

    def __len__(self) -> int:
        if self._replay is not None and self._pos:
            return len(self._items) + self._replay.calls[self._pos - 1].end
        return len(self._items)

    def snapshots(self) -> list:
        """The raw copies captured so far in this step (those of the record it replays
        first), in capture order."""
        replayed = []
        if self._replay is not None and self._pos:
            replayed = [item[1] for item in self._replay.items[:self._replay.calls[self._pos - 1].end]]
        return replayed + [item[1] for item in self._items]

    # -- replaying a record ---------------------------------------------------------------

    def begin_replay(self, record: StepRecord) -> bool:
        """Capture this step by replaying `record` (`ready`: its buffers are written); False
        when the step has captured something already."""
        if self._items or self._taken or self._replay is not None:
            return False
        self._replay = record
        self._pos = 0
        return True

    def _replayed_call(self, key: object, srcs) -> bool:
        """The next call of the replay, if `key` and the tensors match it; otherwise the
        replay ends here and the caller captures as usual."""
        try:
            if self._replay.replay_many(self._pos, key, srcs):
                self._pos += 1
                return True
        except (AttributeError, RuntimeError):  # (a missing gradient; a tensor copy_ refuses)
            pass
        self.abort_replay()
        return False

    def replay_grads(self, names: tuple[str, ...], grads: list) -> bool:
        """A backward pass's gradients, replayed; False: capture them as usual."""
        return self._replay is not None and self._replayed_call(names, grads)

    def replayed(self) -> StepRecord | None:
        """The record this step replayed in full, or None."""
        rec = self._replay
        return rec if rec is not None and self._pos == len(rec.calls) else None

    def end_replay(self) -> None:
        """The replayed step is handed over as a whole (its buffers stay the record's)."""
        self._replay = None
        self._pos = 0

    def abort_replay(self) -> None:
        """What the replay captured becomes ordinary captures of this step; the record is
        given up (its other buffers go back to the pools)."""
        rec, pos = self._replay, self._pos
        if rec is None:
            return
        self._replay = None
        self._pos = 0
        self.record = None
        end = rec.calls[pos - 1].end if pos else 0
        self._items += rec.items[:end]
        self._taken += rec.hand_over(end)
        self._calls = rec.calls[:pos]
        self._recordable = True
        for call in self._calls:
            if call.replace:
                for i in range(call.start, call.end):
                    self._replaceable[rec.items[i][0].name] = i

    def take_record(self, items: list[tuple]) -> StepRecord | None:
        """A record of the step just drained (`items`), if every capture was a plain copy into
        a pooled buffer; call before `take_buffers`."""
        calls, ok = self._calls, self._recordable
        self._calls, self._recordable = [], True
        if (not ok or not calls or calls[-1].end != len(items) or len(self._taken) != len(items)
                or self.buffers.writer_process is None):
            return None
        return StepRecord(calls, items, list(self._taken), self.buffers.give_back, self.buffers.lock)

    # -- capturing ------------------------------------------------------------------------

    def capture(self, plan: TensorPlan, tensor: torch.Tensor, want_raw: bool,
                replace: bool = False) -> None:
        """Snapshot `tensor` now. With `replace`, a later capture of the same name in this step
        takes the earlier one's place (gradients accumulated over several backward passes)."""
        if self._replay is not None:
            if self._replay.replay_one(self._pos, plan, tensor, replace):
                self._pos += 1
                return
            self.abort_replay()
        if type(tensor) not in _PLAIN_TYPES and is_dtensor(tensor):
            self._capture_sharded(plan, tensor, want_raw, replace)
            return
        # (a gradient needs no detach: only what autograd tracks does, or the copy would be recorded)
        t = tensor.detach() if tensor.requires_grad else tensor
        raw = None
        pooled = False
        if t.dtype in _POOLED and t.layout is _STRIDED and not t.is_neg():
            # The common case: a real, dense tensor numpy can view as it is.
            if want_raw:
                raw = self._pooled_copy(t)
                pooled = True
        else:
            t = _plain(t)
            if want_raw:
                raw = self._snapshot(t)
        reductions = _NONE
        if plan.reductions and t.numel():
            reductions = [reduce_tensor(t, red, is_abs) for red, is_abs in plan.reductions]
        # (plan, raw copy, reductions as 0-d tensors, shape)
        item = (plan, raw, reductions, raw.shape if raw is not None else tuple(t.shape))
        if pooled and reductions is _NONE and self._recordable:
            start = len(self._items)
            self._calls.append(RecordedCall(ONE, plan, start, start + 1, replace, [SIGNATURE(t)],
                                            [self._taken[-1][1]]))
        else:
            self._recordable = False
        if replace:
            self._replace(item)
        else:
            self._items.append(item)

    def capture_value(self, plan: TensorPlan, value: float) -> None:
        """Store a Python float as a one-element float64 array (what `save_scalar` writes for
        it) in a pooled buffer, like a tensor's snapshot: a saving step with scalars can then
        be recorded and replayed like one without."""
        if self._replay is not None:
            if self._replay.replay_value(self._pos, plan, value):
                self._pos += 1
                return
            self.abort_replay()
        entry = self.buffers.take(_SCALAR_LIKE)
        arr = entry[2]
        arr[0] = value
        self._taken.append(entry)
        start = len(self._items)
        if self._recordable:
            self._calls.append(RecordedCall(VALUE, plan, start, start + 1, False, [], [arr]))
        self._items.append((plan, arr, _NONE, arr.shape))

    def _capture_sharded(self, plan: TensorPlan, tensor: torch.Tensor, want_raw: bool,
                         replace: bool) -> None:
        """A DTensor (FSDP2's parameters and gradients): the reductions of the whole tensor, and
        its whole value when that is saved, through collectives every rank makes alike (so what
        decides them is the plan, never this rank's listeners; see `sharded`)."""
        self._recordable = False
        reductions = _NONE
        if plan.reductions and tensor.numel():
            reductions = full_reductions(tensor, plan.reductions, plan.name)
        raw = None
        if plan.save_raw or plan.histogram or plan.tb_scalar:
            whole = full_value(tensor)
            if want_raw:
                raw = self._snapshot(_plain(whole))
        item = (plan, raw, reductions, tuple(tensor.shape))
        if replace:
            self._replace(item)
        else:
            self._items.append(item)

    def _replace(self, item: tuple) -> None:
        """Add `item`, in the place of an earlier capture of the same name in this step."""
        name = item[0].name
        at = self._replaceable.get(name)
        if at is None:
            self._replaceable[name] = len(self._items)
            self._items.append(item)
        else:
            self._items[at] = item
            self._recordable = False  # (a step of several backward passes is not replayed)

    def capture_many(self, pairs: Sequence[tuple[TensorPlan, torch.Tensor]], tb: bool,
                     replace: bool = False, names: tuple[str, ...] | None = None) -> None:
        """`capture` for several tensors (a step's parameters, a backward pass's gradients):
        when all are plain tensors saved raw (the usual case), their buffers are taken at once
        and one call copies them all, and the per-tensor work is one loop instead of several
        calls per tensor (on the training thread, between torch kernels that have evicted the
        interpreter's caches, each call costs microseconds). `tb`: a TensorBoard writer wants
        the raw values of histogram and scalar tensors. `names`: the gradient names, for a
        backward pass's gradients (`pairs` is then a new list each time)."""
        if not pairs:
            return
        if self._replay is not None and names is None and self._replayed_call(pairs, None):
            return
        srcs = [tensor.detach() if tensor.requires_grad else tensor for _, tensor in pairs]
        for (plan, _), t in zip(pairs, srcs, strict=True):
            if (plan.reductions or not (plan.save_raw or (tb and (plan.histogram or plan.tb_scalar)))
                    or t.dtype not in _POOLED or t.layout is not _STRIDED or t.is_neg()
                    or type(t) not in _PLAIN_TYPES):
                break
        else:  # all plain
            entries = self.buffers.take_many(srcs)
            self._taken += entries
            dsts = [e[1] for e in entries]
            _copy_all(dsts, srcs)
            items = [(plan, e[2], _NONE, e[2].shape) for (plan, _), e in zip(pairs, entries, strict=True)]
            if self._recordable:
                start = len(self._items)
                if names is None:
                    call = RecordedCall(MANY, pairs, start, start + len(items), replace,
                                        list(map(SIGNATURE, srcs)), dsts, [t for _, t in pairs])
                else:
                    call = RecordedCall(GRADS, names, start, start + len(items), replace,
                                        list(map(SIGNATURE, srcs)), dsts)
                self._calls.append(call)
            if replace:
                for item in items:
                    self._replace(item)
            else:
                self._items += items
            return
        self._recordable = False
        for plan, tensor in pairs:
            self.capture(plan, tensor, plan.save_raw or (tb and (plan.histogram or plan.tb_scalar)),
                         replace)

    def _snapshot(self, t: torch.Tensor) -> np.ndarray:
        if t.dtype in _BIT_VIEWS or t.dtype == torch.complex32 or not t.numel():
            return _copy_plain(t)  # converted on the way to numpy: a pooled buffer gains nothing
        return self._pooled_copy(t)

    def _pooled_copy(self, t: torch.Tensor) -> np.ndarray:
        entry = self.buffers.take(t)
        entry[1].copy_(t)
        self._taken.append(entry)
        return entry[2]

    def take_buffers(self) -> list[Buffer]:
        """The host buffers this step's snapshots live in (for `HostBuffers.give_back` once they
        are written)."""
        self.abort_replay()
        taken, self._taken = self._taken, []
        self._calls, self._recordable = [], True
        self.buffers.end_step()
        return taken

    def drain(self) -> list[tuple[TensorPlan, np.ndarray | None, dict | None, tuple[int, ...]]]:
        """Everything captured, with reductions as host numpy 0-d arrays (an empty sequence
        where a tensor has none); empties the buffer."""
        self.abort_replay()
        items, self._items = self._items, []
        self._replaceable = {}
        tensors = [r for it in items for r in it[2]]
        if not tensors:
            return items
        host = iter(_to_host(tensors))
        out = []
        for plan, raw, reductions, shape in items:
            values = {pair: next(host) for pair in plan.reductions[: len(reductions)]}
            out.append((plan, raw, values, shape))
        return out


def packed_to_host(parts: list[tuple[list[int], torch.Tensor]]) -> list[tuple[list[int], torch.Tensor]]:
    """1-d tensors of one device and several dtypes -> CPU copies, in one transfer.

    Every tensor is reinterpreted as bytes, the bytes are concatenated and copied once, and the
    slices are viewed back as their dtypes (widest first, so every slice stays aligned)."""
    parts = sorted(parts, key=lambda p: -p[1].element_size())
    blob = torch.cat([s.reshape(-1).view(torch.uint8) for _, s in parts]).cpu()
    out = []
    offset = 0
    for idx, s in parts:
        n = s.numel() * s.element_size()
        out.append((idx, blob[offset : offset + n].view(s.dtype)))
        offset += n
    return out


def _to_host(tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """0-d tensors -> 0-d numpy arrays, in order, with one host transfer per device."""
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    result: list[np.ndarray | None] = [None] * len(tensors)
    by_device: dict[torch.device, list[tuple[list[int], torch.Tensor]]] = {}
    for (device, _dtype), idx in groups.items():
        stacked = torch.stack([tensors[i] for i in idx])
        by_device.setdefault(device, []).append((idx, stacked))
    for device, parts in by_device.items():
        host_parts = parts if device.type == "cpu" else packed_to_host(parts)
        for idx, s in host_parts:
            arr = cpu_tensor_to_numpy(s)
            for k, i in enumerate(idx):
                result[i] = arr[k, ...]
    return result  # type: ignore[return-value]


__all__ = ["HostBuffers", "StepBuffer", "cpu_tensor_to_numpy", "host_copy", "packed_to_host"]
