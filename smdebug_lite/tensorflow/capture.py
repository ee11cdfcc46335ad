"""Getting tensors out of compiled Keras steps.

Keras (3, and 2 through ``tf_keras``) runs ``fit``/``evaluate``/``predict`` steps as
``tf.function`` (maybe XLA) graphs, so a Python callback only ever sees gradients and layer
outputs as symbolic tensors while the step is traced. smdebug's TF2 hook could therefore not
save them in ``fit``. Here the hook builds a second, *instrumented* step function whose trace
records the wanted tensors (gradients at the optimizer, layer inputs/outputs at each layer's
``call``) and returns them as extra outputs. While the hook is attached, the model's
``<kind>_function`` is a dispatcher that runs the instrumented function on steps that save such
tensors and Keras' own function, untouched, on every other step, so non-saving steps cost
nothing more than a call.

With ``detect_non_finite`` the hook also builds a *checked* variant, run on every step the
instrumented one does not run: it captures nothing to save, but its trace (and the instrumented
one's) reduces the step's weights, layer outputs, loss and gradients into one vector for the
host to check (``non_finite_watch.py``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf

from smdebug_lite.tensorflow.non_finite_watch import CHECK_KEY

KINDS = ("train", "test", "predict")


@dataclass
class CaptureSession:
    """What the instrumented steps and patched layers share with the hook that owns them: the
    hook's callbacks, and the state of the step being traced or run. The hook reads and resets
    `captured` and `step_outputs` when it finishes a step."""

    wants: Callable[[str], bool]  # could the tensor `name` be saved at all?
    on_layer_call: Callable[..., None]  # (layer, is_root, args, kwargs, outputs)
    on_step_data: Callable[..., None]  # (capture, kind, data): model inputs and labels
    on_failure: Callable[[str, BaseException, bool], None]  # (kind, error, captures): a step
    # function failed to build
    trace_kind: str | None = None  # the kind whose instrumented function is being traced
    trace_captures: bool = True  # whether that trace captures tensors to save (else checks only)
    # `detect_non_finite`: a new GraphCheck for a step traced in the given graph, else None
    new_check: Callable[[Any], Any] | None = None
    check: Any = None  # the check vector of the step that ran
    captured: dict[str, Any] = field(default_factory=dict)  # tensors of the step that ran
    step_outputs: Any = None  # what the step function returned (the batch logs)
    # A distribution strategy traces each replica's step in a thread of its own, switching
    # between them mid-step: each thread has its own capture.
    _threads: threading.local = field(default_factory=threading.local, repr=False)

    @property
    def active(self) -> Capture | None:
        """The capture of the step this thread is tracing (or running eagerly)."""
        return getattr(self._threads, "capture", None)

    @active.setter
    def active(self, capture: Capture | None) -> None:
        self._threads.capture = capture


class Capture:
    """Tensors recorded while one instrumented step is traced (or run eagerly)."""

    def __init__(self, session: CaptureSession, kind: str) -> None:
        self.session = session
        self.kind = kind
        self.graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        self.tensors: dict[str, tf.Tensor] = {}
        self.captures = session.trace_captures
        self.check = None if session.new_check is None else session.new_check(self.graph)

    def add(self, name: str, value: Any) -> None:
        if not self.captures or name in self.tensors or not self.session.wants(name):
            return
        if isinstance(value, tf.IndexedSlices):
            value = tf.convert_to_tensor(value)
        if not isinstance(value, tf.Tensor):
            return
        # Tensors made inside a nested control-flow graph (an RNN cell in a while loop) cannot
        # leave the step function; they are skipped rather than breaking the trace.
        if self.graph is not None and getattr(value, "graph", None) is not self.graph:
            return
        self.tensors[name] = value


@dataclass
class StepFunctions:
    """Keras' own step function for one kind, the dispatcher the hook puts in its place, and the
    instrumented variant the dispatcher runs on steps that save captured tensors."""

    plain: Any = None
    dispatcher: Any = None
    runner: Any = None
    use_runner: bool = False  # whether the current step runs the instrumented variant
    names: set[str] | None = None  # what the instrumented trace captured; None until traced
    failed: bool = False
    checked: Any = None  # the checked variant (`detect_non_finite`), run instead of `plain`
    use_checked: bool = False
    checked_ran: bool = False  # it ran once: an error now is training's, not the trace's
    checked_failed: bool = False


def run_plain(session: CaptureSession, fns: StepFunctions, *args, **kwargs):
    """Keras' own function, keeping a reference to what it returns (no copy, no device sync):
    the hook reads the batch logs when the step is finished, only if it saves them."""
    outputs = fns.plain(*args, **kwargs)
    session.step_outputs = outputs
    return outputs


def build_dispatcher(session: CaptureSession, fns: StepFunctions):
    """The one function the model calls for every step of a kind while the hook is attached.

    It stays in place across steps: Keras 2 hands the evaluation loop its step function before
    any callback runs, so a per-step swap of the model's attribute would not reach it."""

    def dispatcher(*args, **kwargs):
        if fns.use_runner and fns.runner is not None:
            return fns.runner(*args, **kwargs)
        if fns.use_checked and fns.checked is not None:
            return fns.checked(*args, **kwargs)
        return run_plain(session, fns, *args, **kwargs)

    dispatcher._smd_runner = True  # type: ignore[attr-defined]
    return dispatcher


def tensors_of(value: Any) -> list[tf.Tensor]:
    return [t for t in tf.nest.flatten(value) if isinstance(t, (tf.Tensor, tf.IndexedSlices))]


def expand_1d(tensor: Any) -> Any:
    """A rank-1 dense tensor as ``(N, 1)``: how the Keras step of smdebug's days (TF 2.2-2.4,
    ``data_adapter.expand_1d``) handed a batch's inputs and labels to the hook."""
    if isinstance(tensor, tf.Tensor) and tensor.shape.rank == 1:
        return tf.expand_dims(tensor, -1)
    return tensor


def patch_layer(layer, session: CaptureSession, is_root: bool) -> bool:
    """Route ``layer.call`` through the hook; False if it was already patched."""
    if "_smd_original_call" in layer.__dict__:
        return False
    original = layer.call

    @functools.wraps(original)
    def call(*args, **kwargs):
        outputs = original(*args, **kwargs)
        session.on_layer_call(layer, is_root, args, kwargs, outputs)
        return outputs

    object.__setattr__(layer, "_smd_original_call", original)
    object.__setattr__(layer, "call", call)
    return True


def unpatch_layer(layer) -> None:
    if "_smd_original_call" in layer.__dict__:
        layer.__dict__.pop("call", None)
        layer.__dict__.pop("_smd_original_call", None)


def install_step_dispatcher(model, kind: str, session: CaptureSession) -> None:
    """Make ``model.<kind>_step`` capture tensors when (and only when) the instrumented function
    is being traced. Keras' own function keeps calling the original step."""
    attr = f"{kind}_step"
    if f"_smd_original_{attr}" in model.__dict__:
        return
    had_own = attr in model.__dict__
    original = getattr(model, attr)

    def step(data):
        if session.trace_kind != kind:
            return original(data)
        cap = Capture(session, kind)
        previous, session.active = session.active, cap
        try:
            if cap.check is None:
                outputs = original(data)
            else:
                cap.check.start(model)
                with cap.check.watching_loss(model):
                    outputs = original(data)
        finally:
            session.active = previous
        if cap.captures:
            session.on_step_data(cap, kind, data)
        tensors = dict(cap.tensors)
        if cap.check is not None:
            vector = cap.check.vector(outputs)
            if (not cap.captures and isinstance(outputs, dict)
                    and tf.distribute.get_strategy().num_replicas_in_sync == 1):
                # One flat dict: a step function returns it in a third of a nested pair's time
                return {**outputs, CHECK_KEY: vector}
            tensors[CHECK_KEY] = vector
        return outputs, tensors

    object.__setattr__(model, f"_smd_original_{attr}", (original, had_own))
    object.__setattr__(model, attr, step)


def remove_step_dispatcher(model, kind: str) -> None:
    attr = f"{kind}_step"
    saved = model.__dict__.pop(f"_smd_original_{attr}", None)
    if saved is None:
        return
    original, had_own = saved
    if had_own:
        object.__setattr__(model, attr, original)
    else:
        model.__dict__.pop(attr, None)


@contextlib.contextmanager
def first_replica_captures(trainer_module: str) -> Iterator[None]:
    """While an instrumented step is traced, hand the captured tensors of the first replica out
    of Keras' per-replica reduction, which would otherwise sum each of them into one number under
    a multi-replica strategy (the step's own outputs are reduced as Keras reduces them)."""
    module = importlib.import_module(trainer_module)
    original = module.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction, *args, **kwargs):
        if isinstance(values, tuple) and len(values) == 2 and isinstance(values[1], dict):
            outputs, captured = values
            first = {name: strategy.experimental_local_results(value)[0]
                     for name, value in captured.items()}
            return original(outputs, strategy, reduction, *args, **kwargs), first
        return original(values, strategy, reduction, *args, **kwargs)

    module.reduce_per_replica = reduce_per_replica
    try:
        yield
    finally:
        module.reduce_per_replica = original


def build_runner(model, kind: str, session: CaptureSession, fns: StepFunctions,
                 trainer_module: str, captures: bool = True):
    """Compile the instrumented ``<kind>_function`` (`captures`) or its checked variant and wrap
    it so that it hands the captured tensors and the check vector to the hook and returns
    exactly what Keras' own function returns."""
    attr = f"{kind}_function"
    make = getattr(model, f"make_{kind}_function")
    installed = getattr(model, attr)
    try:
        make(force=True)
        instrumented = getattr(model, attr)
    finally:
        setattr(model, attr, installed)

    def runner(*args, **kwargs):
        session.trace_kind, session.trace_captures = kind, captures
        try:
            with first_replica_captures(trainer_module):
                result = instrumented(*args, **kwargs)
        except Exception as error:
            ran_before = fns.names is not None if captures else fns.checked_ran
            if ran_before:
                raise  # it worked before: a real training error, not ours
            if captures:
                fns.failed = True
            else:
                fns.checked_failed = True
            session.on_failure(kind, error, captures)
            return run_plain(session, fns, *args, **kwargs)
        finally:
            session.trace_kind, session.trace_captures = None, True
        if isinstance(result, dict) and CHECK_KEY in result:  # (checks only, in one dict)
            outputs, captured = dict(result), {}
            session.check = outputs.pop(CHECK_KEY)
        else:
            outputs, captured = result
            session.check = captured.pop(CHECK_KEY, None)
        if captures:
            fns.names = set(captured)
        else:
            fns.checked_ran = True
        session.captured.update(captured)
        session.step_outputs = outputs
        return outputs

    runner._smd_runner = True  # type: ignore[attr-defined]
    return runner


__all__ = [
    "KINDS",
    "Capture",
    "CaptureSession",
    "StepFunctions",
    "build_dispatcher",
    "build_runner",
    "expand_1d",
    "first_replica_captures",
    "install_step_dispatcher",
    "patch_layer",
    "remove_step_dispatcher",
    "run_plain",
    "tensors_of",
    "unpatch_layer",
]
