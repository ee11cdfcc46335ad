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

from collections import OrderedDict
from typing import Any

import numpy as np

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.exceptions import TensorNotReducible, TensorUnavailableForStep
from smdebug_lite.modes import ModeKeys

GLOBAL = ModeKeys.GLOBAL
REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2")

Key = tuple[Any, str, int, ModeKeys, "str | None"]


def compute_reduction(value: np.ndarray, name: str, abs: bool = False) -> float:
    """A reduction over all elements (norms are vector norms of the flattened tensor).

    numpy conventions: population variance/std (ddof=0); min/max of an empty tensor are NaN.
    """
    x = np.asarray(value)
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
    # ndarray methods: these run once per tensor and step, numpy's wrappers cost more than
    # the work on small tensors.
    with np.errstate(all="ignore"):
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
        key = self._key(trial, name, step, mode, worker)
        arr = self._values.get(key)
        if arr is not None:
            self._values.move_to_end(key)
            self.hits += 1
            return arr
        known = self._unavailable.get(key)
        if known is not None:
            raise known
        tensor = self.tensor(trial, name)
        self.loads += 1
        try:
            raw = tensor.value(step, mode=mode, worker=worker)
        except TensorUnavailableForStep as e:
            self._unavailable[key] = e  # permanent by definition
            raise
        arr = np.asarray(raw).view()
        arr.flags.writeable = False
        self._values[key] = arr
        self._bytes += arr.nbytes
        self._evict()
        return arr

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
        key = self._key(trial, name, step, mode, worker)
        rkey = (key, reduction, bool(abs))
        out = self._reductions.get(rkey)
        if out is not None:
            return out
        try:
            arr = self.value(trial, name, step, mode, worker)
        except TensorUnavailableForStep:
            saved = self.tensor(trial, name).reduction_value(
                step, reduction, mode=mode, worker=worker, abs=abs)
            out = float(np.asarray(saved).reshape(-1)[0]) if np.size(saved) else float("nan")
        else:
            out = compute_reduction(arr, reduction, abs)
        self._reductions[rkey] = out
        return out

    def saved_reductions(self, trial: Any, name: str, step: int, mode: ModeKeys = GLOBAL,
                         worker: str | None = None) -> dict[tuple[str, bool], float]:
        """The reductions saved at this step ({(name, abs): value}); {} when none or unknown."""
        tensor = self.tensor(trial, name)
        getter = getattr(tensor, "reduction_values", None)
        if getter is None:
            return {}
        try:
            saved = getter(step, mode=mode, worker=worker)
        except (TensorUnavailableForStep, KeyError, ValueError):
            return {}
        return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in (saved or {}).items()
                if np.size(v)}
