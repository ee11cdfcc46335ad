"""`detect_non_finite` for the Keras hook: every step checked for NaN/Inf inside the step graph.

Keras runs ``fit``/``evaluate``/``predict`` steps as compiled graphs, so the check is traced
into them (`capture.py` builds a *checked* step function, run on every step the hook does not
instrument for saving, and the instrumented one checks too). While such a step is traced, a
`GraphCheck` reduces to one float32 sum each, in the order they are made:

* every trainable variable as the step starts (phase ``weights``: a non-finite one was written
  by the previous step's update, or by a callback after it);
* every layer output, in call order, and the model's predictions (``forward``);
* the loss ``compute_loss`` returns, else the step's ``loss`` log (``loss``);
* every gradient the optimizer receives, in its order (``backward``), except under a dynamic
  loss scale (mixed precision), whose overflowing steps are part of training: the optimizer
  skips them and lowers the scale.

The step returns those sums, and for each phase NaN/+Inf/-Inf counts computed under a
``tf.cond`` that runs them only when one of the phase's sums is not finite, as ONE float64
vector: the host reads it once per step (the step's only synchronisation) and looks no further
when every entry is finite. A sum of finite values is finite unless it overflows float32; an
entry whose sum is not finite but whose counts are zero overflowed, and is passed over.

At the first entry with a NaN or an Inf, `NonFiniteWatch` writes the worker's record
(`writer.non_finite`), logs one warning and stands down. The step is saved only when the save
schedule saves it anyway: a step already run cannot be run again to save its tensors.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from smdebug_lite.format.locations import non_finite_file_name
from smdebug_lite.format.non_finite import PHASES, NonFiniteRecord
from smdebug_lite.log.logger import get_logger
from smdebug_lite.tensorflow.naming import variable_name
from smdebug_lite.writer.non_finite import write_non_finite_record

logger = get_logger(__name__)

# The key of the check vector among an instrumented step's captured tensors (no tensor the hook
# saves has a name starting with a NUL).
CHECK_KEY = "\x00non_finite"
LOSS_NAME = "loss"  # the name the hook saves the loss under (Keras' log key)
Identity = tuple[int, str, int]  # (step, mode name, mode step)
# Phases counted under one tf.cond each: a phase's tensors are held only until its sums exist.
_GROUPS = (("weights",), ("forward", "loss"), ("backward",))


@dataclass(frozen=True, slots=True)
class Entry:
    """One checked tensor: its phase, its layer (``""`` for the model itself) and the name the
    hook saves it under."""

    phase: str
    module: str
    tensor: str


def _float_sum(t: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(t if t.dtype == tf.float32 else tf.cast(t, tf.float32))


def _counts(t: tf.Tensor) -> tf.Tensor:
    """NaN, +Inf and -Inf counts of `t` (float64: exact up to 2**53)."""
    def count(mask: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(tf.cast(mask, tf.int64))

    inf = tf.constant(np.inf, t.dtype)
    return tf.cast(tf.stack([count(tf.math.is_nan(t)), count(tf.equal(t, inf)),
                             count(tf.equal(t, -inf))]), tf.float64)


def _all_counts(values: list[tf.Tensor]) -> tf.Tensor:
    """NaN, +Inf and -Inf counts of each value, 3 per value (float64), computed over the values
    laid end to end: a few operations per value rather than a dozen, since the operations of a
    branch not taken still pass through the graph executor at every step."""
    n = len(values)
    parts = [tf.reshape(tf.cast(v, tf.float32), [-1]) for v in values]
    flat = tf.concat(parts, 0)
    # (shapes follow the values', which XLA needs: no tf.repeat by sizes)
    owner = tf.concat([tf.zeros_like(p, tf.int32) + i for i, p in enumerate(parts)], 0)
    inf = tf.constant(np.inf, tf.float32)
    kind = (tf.cast(tf.math.is_nan(flat), tf.int32) + 2 * tf.cast(tf.equal(flat, inf), tf.int32)
            + 3 * tf.cast(tf.equal(flat, -inf), tf.int32))  # 0 finite, 1 NaN, 2 +Inf, 3 -Inf
    counts = tf.math.unsorted_segment_sum(tf.ones_like(kind), owner * 4 + kind, 4 * n)
    return tf.cast(tf.reshape(tf.reshape(counts, [n, 4])[:, 1:], [-1]), tf.float64)


def _counts_if_non_finite(sums: tf.Tensor, values: list[tf.Tensor]) -> tf.Tensor:
    """The counts of each value (3 per value), or zeros when every sum is finite."""
    n = len(values)
    return tf.cond(tf.reduce_all(tf.math.is_finite(sums)),
                   lambda: tf.zeros([3 * n], tf.float64), lambda: _all_counts(values))


def _read(variable: Any) -> tf.Tensor:
    if isinstance(variable, keras.Variable):
        return tf.convert_to_tensor(variable.value)
    return tf.convert_to_tensor(variable)


def skips_overflows(optimizer: Any) -> bool:
    """Whether `optimizer` scales the loss dynamically (Keras 3's ``LossScaleOptimizer``
    always does, Keras 2's when ``dynamic``): it skips the steps whose gradients overflow, on
    purpose."""
    return (isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
            or getattr(optimizer, "dynamic", False) is True)


def _owners(model: Any) -> dict[int, str]:
    """The layer each trainable variable belongs to, by the variable's id: the innermost layer
    that lists it (``""`` for the model itself)."""
    owners: dict[int, str] = {}
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for v in layer.trainable_weights:
            owners[id(v)] = "" if layer is model else layer.name
    return owners


class GraphCheck:
    """The tensors one checked step's trace makes, reduced as they are made."""

    def __init__(self, watch: NonFiniteWatch, graph: Any) -> None:
        self.watch = watch
        self.graph = graph  # the step's graph (None when the step runs eagerly)
        self.owners: dict[int, str] = {}
        self.kept: dict[str, list[tuple[Entry, tf.Tensor, tf.Tensor]]] = {p: [] for p in PHASES}

    def _usable(self, value: Any) -> tf.Tensor | None:
        if isinstance(value, tf.IndexedSlices):
            value = value.values
        if not isinstance(value, tf.Tensor) or not value.dtype.is_floating:
            return None
        # (a tensor made in a nested control-flow graph, an RNN cell's, cannot leave it)
        if self.graph is not None and getattr(value, "graph", None) is not self.graph:
            return None
        return value

    def add(self, phase: str, module: str, name: str, value: Any) -> None:
        t = self._usable(value)
        if t is not None:
            self.kept[phase].append((Entry(phase, module, name), _float_sum(t), t))

    def start(self, model: Any) -> None:
        """The trainable variables as the step starts."""
        self.owners = _owners(model)
        for v in model.trainable_variables:
            self.add("weights", self.owners.get(id(v), ""), variable_name(v), _read(v))

    def gradient(self, variable: Any, grad: Any, name: str) -> None:
        self.add("backward", self.owners.get(id(variable), ""), name, grad)

    @contextlib.contextmanager
    def watching_loss(self, model: Any) -> Iterator[None]:
        """Check what the model's ``compute_loss`` returns while the step is traced (Keras 3's
        and Keras 2's ``train_step``/``test_step`` compute their loss through it)."""
        own = model.__dict__.get("compute_loss")
        original = model.compute_loss

        @functools.wraps(original)
        def compute_loss(*args, **kwargs):
            loss = original(*args, **kwargs)
            self.add("loss", "", LOSS_NAME, loss)
            return loss

        object.__setattr__(model, "compute_loss", compute_loss)
        try:
            yield
        finally:
            if own is None:
                model.__dict__.pop("compute_loss", None)
            else:
                object.__setattr__(model, "compute_loss", own)

    def vector(self, outputs: Any) -> tf.Tensor:
        """``[trace id, sums..., counts...]``: what the host reads once per step."""
        if not self.kept["loss"] and isinstance(outputs, dict):
            self.add("loss", "", LOSS_NAME, outputs.get(LOSS_NAME))
        entries: list[Entry] = []
        sums: list[tf.Tensor] = []
        counts: list[tf.Tensor] = []
        for group in _GROUPS:
            kept = [k for p in group for k in self.kept[p]]
            if not kept:
                continue
            group_sums = tf.stack([s for _, s, _ in kept])
            entries += [e for e, _, _ in kept]
            sums.append(group_sums)
            counts.append(_counts_if_non_finite(group_sums, [t for _, _, t in kept]))
        trace = self.watch.register(tuple(entries))
        head = tf.constant([float(trace)], tf.float64)
        return tf.concat([head] + [tf.cast(s, tf.float64) for s in sums] + counts, 0)


class NonFiniteWatch:
    """The host side: the entries of each trace, the vector of the step that ran, the record."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.traces: list[tuple[Entry, ...]] = []
        self.trace_ids: dict[tuple[Entry, ...], int] = {}
        self.previous: Identity | None = None  # the last step checked
        self.done = False  # a record was written: the watch stands down

    def register(self, entries: tuple[Entry, ...]) -> int:
        if entries not in self.trace_ids:
            self.trace_ids[entries] = len(self.traces)
            self.traces.append(entries)
        return self.trace_ids[entries]

    def new_check(self, graph: Any) -> GraphCheck:
        return GraphCheck(self, graph)

    def step_checked(self, vector: Any, identity: Identity) -> None:
        """Read the vector of the step that ran (the one host read); record a first NaN/Inf."""
        if self.done or vector is None:
            return
        values = np.asarray(vector.numpy() if hasattr(vector, "numpy") else vector)
        previous = self.previous or identity
        self.previous = identity
        if np.isfinite(values).all():
            return
        entries = self.traces[int(values[0])]
        n = len(entries)
        counts = values[1 + n:].reshape(n, 3)
        for entry, found in zip(entries, counts, strict=True):
            if found.any():
                self._found(entry, previous if entry.phase == "weights" else identity,
                            tuple(int(c) for c in found))
                return
        # (sums that overflowed float32: nothing non-finite; the watch goes on)

    def check_variables(self, model: Any) -> None:
        """The trainable variables after the last update of a training loop (eagerly, once)."""
        if self.done or model is None or self.previous is None:
            return
        owners = _owners(model)
        for v in model.trainable_variables:
            t = _read(v)
            if not t.dtype.is_floating or bool(tf.reduce_all(tf.math.is_finite(t))):
                continue
            found = tuple(int(c) for c in _counts(t).numpy())
            self._found(Entry("weights", owners.get(id(v), ""), variable_name(v)),
                        self.previous, found)
            return

    def _found(self, entry: Entry, identity: Identity, found: tuple[int, ...]) -> None:
        hook = self.hook
        step, mode, mode_step = identity
        record = NonFiniteRecord(step=step, mode=mode, mode_step=mode_step, worker=hook.worker,
                                 phase=entry.phase, module=entry.module, tensor=entry.tensor,
                                 nan=found[0], posinf=found[1], neginf=found[2],
                                 wall_time=time.time())
        self.done = True
        written = False if hook.dry_run else write_non_finite_record(hook.storage, record)
        where_to = f"{hook.out_dir.rstrip('/')}/{non_finite_file_name(record.worker)}"
        logger.warning("smdebug-lite: first non-finite value at %s; %s", record.describe(),
                       f"recorded in {where_to}" if written else
                       "not recorded (dry_run, or this worker has a record already)")


__all__ = ["CHECK_KEY", "Entry", "GraphCheck", "NonFiniteWatch", "skips_overflows"]
