"""Per-rule cache of tensor values and reductions.

Rules look at the same tensor several times per step (abs-mean, then max, then NaN check) and
often at the previous step again on the next invocation. Reading an event record is by far the
most expensive part of a rule, so every (trial, tensor, step, mode, worker) is loaded from
storage at most once while it stays in this cache. When a step only has saved reductions (no
raw value), reductions are answered from those instead.

The cache is bounded (``SMDEBUG_RULE_CACHE_MB``, default 512 MiB) and evicts least recently
used values, never those of the step being evaluated, so a value is never read twice for one
step.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.exceptions import TensorNotReducible, TensorUnavailableForStep
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials.reduction_batch import MIN_ROWS, batchable, reduce_rows

GLOBAL = ModeKeys.GLOBAL
REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2")

Key = tuple[Any, str, int, ModeKeys, "str | None"]


def compute_reduction(value: np.ndarray, name: str, abs: bool = False) -> float:
    """A reduction over all elements (norms are vector norms of the flattened tensor).

    numpy conventions: population variance/std (ddof=0); min/max of an empty tensor are NaN.
    """
    with np.errstate(all="ignore"):
        return _reduce(value, name, abs)


# The ufunc each of these ndarray methods calls on a float array (over all axes); called
# directly, the same loop without the several microseconds of Python around it.
_FLOAT_UFUNCS = {"min": np.minimum.reduce, "max": np.maximum.reduce, "sum": np.add.reduce,
                 "mean": np.add.reduce}
# Steps whose reduction a run computes ahead in one batch, and runs followed at most.
_AHEAD_STEPS = 64
_MAX_RUNS = 4096
# Tensors read at one step from which the next step's reads of them go in one batch (fewer
# gain nothing from it).
_STEP_BATCH_MIN = 8
# Elements below which a float32 count is exact, so that sum / count rounds as numpy's mean.
_EXACT_COUNT = 1 << 24


def _reduce(value: np.ndarray, name: str, abs: bool) -> float:
    """`compute_reduction` inside the caller's `np.errstate` (one for many tensors)."""
    x = value if value.__class__ is np.ndarray else np.asarray(value)
    dt = x.dtype
    op = _FLOAT_UFUNCS.get(name)
    if op is not None and dt.kind == "f" and dt.itemsize >= 4 and 0 < x.size < _EXACT_COUNT:
        # The float path of the methods below: x.mean() is the float sum over all axes
        # divided by the count, rounded to the array's float type (numpy divides in float64;
        # rounding twice gives the same float32 as dividing in float32, the count being exact).
        out = op(np.absolute(x) if abs else x, axis=None)
        return float(out.dtype.type(out / x.size)) if name == "mean" else float(out)
    return _reduce_general(x, name, abs)


def _reduce_general(x: np.ndarray, name: str, abs: bool) -> float:
    if x.dtype == bool:
        x = x.astype(np.int8)
    elif x.dtype.kind not in "iufc":
        raise TensorNotReducible(None, name, x.dtype, abs)
    if abs:
        x = np.abs(x)
    if name not in REDUCTIONS:
        raise ValueError(f"unknown reduction {name!r}; expected one of {', '.join(REDUCTIONS)}")
    if x.size == 0:
        return {"sum": 0.0, "prod": 1.0, "l1": 0.0, "l2": 0.0}.get(name, float("nan"))
    if name == "min":
        out = x.min()
    elif name == "max":
        out = x.max()
    elif name == "mean":
        out = x.mean()
    elif name == "std":
        out = x.std()
    elif name == "variance":
        out = x.var()
    elif name == "sum":
        out = x.sum()
    elif name == "prod":
        out = x.prod()
    elif name == "l1":
        out = np.abs(x).sum()
    else:
        flat = x.ravel()
        out = np.sqrt(np.vdot(flat, flat).real) if np.iscomplexobj(flat) else np.linalg.norm(flat)
    return float(np.real(out))


def _default_max_bytes() -> int:
    return int(env_float("SMDEBUG_RULE_CACHE_MB", 512.0) * (1 << 20))


class TensorCache:
    """Values and reductions read during one rule's evaluation."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = _default_max_bytes() if max_bytes is None else max_bytes
        self._values: OrderedDict[Key, np.ndarray] = OrderedDict()
        self._unavailable: dict[Key, TensorUnavailableForStep] = {}
        self._reductions: dict[tuple[Key, str, bool], float] = {}
        self._tensors: dict[tuple[Any, str], Any] = {}
        # (trial, name, mode, worker, reduction, abs) -> the last step computed or batched.
        self._runs: dict[tuple, int] = {}
        # (trial, mode) -> (the step read last, the tensors read there, in order).
        self._step_reads: dict[tuple, tuple[int, list[str]]] = {}
        self._bytes = 0
        self._current_step: int | None = None
        self.loads = 0  # reads from storage (Tensor.value calls)
        self.hits = 0

    # -- bookkeeping ------------------------------------------------------------------

    def begin_step(self, step: int) -> None:
        """Values of `step` are protected from eviction until the next step begins."""
        self._current_step = step
        if len(self._reductions) > 200_000:
            self._reductions.clear()
        if len(self._unavailable) > 200_000:
            self._unavailable.clear()

    def clear(self) -> None:
        self._values.clear()
        self._unavailable.clear()
        self._reductions.clear()
        self._tensors.clear()
        self._runs.clear()
        self._step_reads.clear()
        self._bytes = 0

    def tensor(self, trial: Any, name: str) -> Any:
        """The trial's Tensor object (raises TensorUnavailable like `trial.tensor`)."""
        k = (trial, name)
        t = self._tensors.get(k)
        if t is None:
            t = trial.tensor(name)
            self._tensors[k] = t
        return t

    @staticmethod
    def _key(trial: Any, name: str, step: int, mode: ModeKeys, worker: str | None) -> Key:
        return (trial, name, int(step), mode, worker)

    # -- values -------------------------------------------------------------------------

    def cached_value(self, trial: Any, name: str, step: int, mode: ModeKeys = GLOBAL,
                     worker: str | None = None) -> np.ndarray | None:
        """The value if it is already in memory, without touching storage."""
        return self._values.get(self._key(trial, name, step, mode, worker))

    def value(self, trial: Any, name: str, step: int, mode: ModeKeys = GLOBAL,
              worker: str | None = None) -> np.ndarray:
        """A read-only array; loaded from storage only the first time."""
        key = (trial, name, int(step), mode, worker)
        values = self._values
        arr = values.get(key)
        if arr is not None:
            values.move_to_end(key)
            self.hits += 1
            return arr
        known = self._unavailable.get(key)
        if known is not None:
            raise known
        if worker is None and self._read_with_step(trial, name, key[2], mode):
            arr = values.get(key)
            if arr is not None:
                return arr
        tensor = self._tensors.get((trial, name)) or self.tensor(trial, name)
        self.loads += 1
        try:
            raw = tensor.value(step, mode=mode, worker=worker)
        except TensorUnavailableForStep as e:
            self._unavailable[key] = e  # permanent by definition
            raise
        arr = self._keep(key, raw)
        if self._bytes > self.max_bytes:
            self._evict()
        return arr

    def _keep(self, key: Key, raw: Any) -> np.ndarray:
        """`raw` as a read-only array, kept under `key` and counted (eviction is left to the
        caller, once for a batch)."""
        arr = np.asarray(raw).view()
        arr.flags.writeable = False
        self._values[key] = arr
        self._bytes += arr.nbytes
        return arr

    def _read_with_step(self, trial: Any, name: str, step: int, mode: ModeKeys) -> bool:
        """Before reading `name` at `step`: when this is the first read at a later step than
        the last one, and at least `_STEP_BATCH_MIN` tensors were read there, those tensors are
        read at this step together (`Trial.step_values`: no per-tensor lookups, the next
        steps' files fetched in one batch), as a rule goes on to read them. True when a batch
        was read. Values it could not simply read are left to `value`."""
        at = (trial, mode)
        seen = self._step_reads.get(at)
        if seen is not None and seen[0] == step:
            seen[1].append(name)
            return False
        self._step_reads[at] = (step, [name])
        if seen is None or step < seen[0] or len(seen[1]) < _STEP_BATCH_MIN:
            return False
        batch = getattr(trial, "step_values", None)
        if batch is None:
            return False
        values = self._values
        wanted = list(dict.fromkeys([*seen[1], name]))
        self._step_reads[at] = (step, wanted)  # read at this step too, by the batch
        names = [n for n in wanted if (trial, n, step, mode, None) not in values]
        try:
            got = batch(step, names, mode=mode)
        except Exception:  # noqa: BLE001 - each is read alone, which explains
            return False
        for n, raw in zip(names, got, strict=True):
            if raw is not None:
                self._keep((trial, n, step, mode, None), raw)
                self.loads += 1
        if self._bytes > self.max_bytes:
            self._evict()
        return True

    def _evict(self) -> None:
        if self._bytes <= self.max_bytes:
            return
        for key in list(self._values):
            if self._bytes <= self.max_bytes:
                break
            if key[2] == self._current_step:
                continue
            self._bytes -= self._values.pop(key).nbytes

    def has_raw_value(self, trial: Any, name: str, step: int, mode: ModeKeys = GLOBAL,
                      worker: str | None = None) -> bool:
        """True if a raw value exists (loads it into the cache as a side effect)."""
        try:
            self.value(trial, name, step, mode, worker)
            return True
        except TensorUnavailableForStep:
            return False

    # -- reductions ---------------------------------------------------------------------

    def reduction(self, trial: Any, name: str, step: int, reduction: str, abs: bool = False,
                  mode: ModeKeys = GLOBAL, worker: str | None = None) -> float:
        """From the raw value when one was saved, else from the saved reduction."""
        rkey = ((trial, name, int(step), mode, worker), reduction, bool(abs))
        out = self._reductions.get(rkey)
        if out is not None:
            return out
        try:
            arr = self.value(trial, name, step, mode, worker)
        except TensorUnavailableForStep:
            out = self._saved_reduction(trial, name, step, reduction, abs, mode, worker)
        else:
            out = compute_reduction(arr, reduction, abs)
            if batchable(reduction, arr):
                self._reduce_ahead(rkey, arr)
        self._reductions[rkey] = out
        return out

    def _reduce_ahead(self, rkey: tuple[Key, str, bool], arr: np.ndarray) -> None:
        """When the reduction `rkey` names continues a run (the same reduction of the same
        tensor asked at its previous saved step), compute it for the tensor's next saved steps
        too, in one numpy call over their values (`reduce_rows`): a rule asks the same of every
        step, and then finds them done. Values of another shape or dtype, or that cannot be
        read, end the batch (their steps are computed, or fail, when asked)."""
        (trial, name, step, mode, worker), reduction, is_abs = rkey
        run = (trial, name, mode, worker, reduction, is_abs)
        runs = self._runs
        last = runs.get(run)
        runs[run] = step
        if last is None or step <= last:
            if len(runs) > _MAX_RUNS:
                runs.clear()
            return
        tensor = self._tensors.get((trial, name)) or self.tensor(trial, name)
        try:
            steps = tensor.steps(mode=mode)
        except Exception:  # noqa: BLE001 - no batch; each step is computed when asked
            return
        pos = bisect.bisect_left(steps, step)
        if not (0 < pos < len(steps) and steps[pos] == step and steps[pos - 1] == last):
            return
        following = steps[pos + 1 : pos + 1 + _AHEAD_STEPS]
        if len(following) < MIN_ROWS:
            return
        shape, dtype = arr.shape, arr.dtype
        done, values = self._reductions, self._values
        rows: list[np.ndarray] = []
        ahead: list[int] = []
        for s in following:
            key = (trial, name, s, mode, worker)
            a = values.get(key)
            if a is None:  # read as `value` reads it, and kept (each value is read once)
                if key in self._unavailable:
                    break
                try:
                    raw = tensor.value(s, mode=mode, worker=worker)
                except TensorUnavailableForStep as e:
                    self._unavailable[key] = e
                    break
                except Exception:  # noqa: BLE001 - met again when the step is asked
                    break
                self.loads += 1
                a = self._keep(key, raw)
            if a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
                break
            rows.append(a)
            ahead.append(s)
        if self._bytes > self.max_bytes:
            self._evict()
        if len(rows) < MIN_ROWS:
            return
        with np.errstate(all="ignore"):
            found = reduce_rows(reduction, is_abs, rows, name)
            # The same as one by one (`_reduce`), checked on the first row.
            if found is None or float(found[0]) != _reduce(rows[0], reduction, is_abs):
                return
        for s, value in zip(ahead, found, strict=True):
            done[((trial, name, s, mode, worker), reduction, is_abs)] = float(value)
        runs[run] = ahead[-1]

    def _saved_reduction(self, trial: Any, name: str, step: int, reduction: str, abs: bool,
                         mode: ModeKeys, worker: str | None) -> float:
        saved = self.tensor(trial, name).reduction_value(
            step, reduction, mode=mode, worker=worker, abs=abs)
        return float(np.asarray(saved).reshape(-1)[0]) if np.size(saved) else float("nan")

    def reductions(self, trial: Any, names: list[str], step: int, reduction: str,
                   abs: bool = False, mode: ModeKeys = GLOBAL, worker: str | None = None
                   ) -> list[float | Exception]:
        """`reduction` of each of `names` at one step, as `reduction` gives them one by one
        (a rule asks the same of every tensor of a step); the values are computed together,
        which costs less per tensor. Where a read or a reduction raised, the exception takes
        the value's place, for the caller to raise when it comes to that tensor: a rule that
        stops at an earlier tensor never meets it, as it would not have read one by one."""
        abs = bool(abs)
        step = int(step)
        done = self._reductions
        out: list[float | Exception] = []
        pending: list[tuple[int, tuple, np.ndarray]] = []
        for name in names:
            rkey = ((trial, name, step, mode, worker), reduction, abs)
            got = done.get(rkey)
            if got is None:
                try:
                    arr = self.value(trial, name, step, mode, worker)
                except TensorUnavailableForStep:
                    try:
                        got = done[rkey] = self._saved_reduction(trial, name, step, reduction,
                                                                 abs, mode, worker)
                    except Exception as e:  # raised in its turn by the caller
                        got = e
                except Exception as e:
                    got = e
                else:
                    pending.append((len(out), rkey, arr))
            out.append(got)  # type: ignore[arg-type]
        if pending:
            with np.errstate(all="ignore"):
                for i, rkey, arr in pending:
                    try:
                        out[i] = done[rkey] = _reduce(arr, reduction, abs)
                    except Exception as e:
                        out[i] = e
            for _, rkey, arr in pending:
                if batchable(reduction, arr):
                    self._reduce_ahead(rkey, arr)
        return out

    def saved_reductions(self, trial: Any, name: str, step: int, mode: ModeKeys = GLOBAL,
                         worker: str | None = None,
                         only: Collection[tuple[str, bool]] | None = None
                         ) -> dict[tuple[str, bool], float]:
        """The reductions saved at this step ({(name, abs): value}); {} when none or unknown.
        With `only`, just those of them (the others are not read)."""
        tensor = self.tensor(trial, name)
        getter = getattr(tensor, "reduction_values", None)
        if getter is None:
            return {}
        try:
            saved = (getter(step, mode=mode, worker=worker) if only is None
                     else getter(step, mode=mode, worker=worker, only=only))
        except (TensorUnavailableForStep, KeyError, ValueError):
            return {}
        return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in (saved or {}).items()
                if np.size(v)}
