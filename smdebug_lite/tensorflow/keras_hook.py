"""The Keras 3 / TensorFlow 2 hook: a Keras callback over the framework-agnostic HookCore.

Steps are Keras batches (``on_<train|test|predict>_batch_begin``), in TRAIN, EVAL (evaluate and
validation during fit) or PREDICT mode. Weights, biases and optimizer variables are read before
the step runs (the values the step's forward pass and gradients used, as in the PyTorch hook);
gradients and layer tensors come from an instrumented step function (see ``capture.py``);
losses and metrics from the batch logs. With ``detect_non_finite`` every step of those loops is
checked inside its graph (``non_finite_watch.py``). Custom training loops use ``wrap_tape`` /
``save_gradients`` / ``wrap_optimizer`` / ``register_model`` in eager mode.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from smdebug_lite.config.collection import Collection, CollectionKeys
from smdebug_lite.hooks.arguments import hook_constructor
from smdebug_lite.hooks.core import HookCore, TensorPlan, to_numpy_value
from smdebug_lite.hooks.step_machine import Capture
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.tensorflow import capture as cap
from smdebug_lite.tensorflow.attachment import Attachment
from smdebug_lite.tensorflow.flavor import flavor_of
from smdebug_lite.tensorflow.keras2 import Keras2CallbackProtocol
from smdebug_lite.tensorflow.keras_collection import Collection as TFCollection
from smdebug_lite.tensorflow.keras_collection import as_tf_collection
from smdebug_lite.tensorflow.naming import (
    gradient_name,
    indexed_names,
    layer_tensor_prefix,
    log_key_collection,
    structure_names,
    variable_name,
)
from smdebug_lite.tensorflow.non_finite_watch import NonFiniteWatch, skips_overflows
from smdebug_lite.tensorflow.reductions import tf_reductions
from smdebug_lite.tensorflow.tape import TapeCallbacks, hook_tape

logger = get_logger(__name__)

K = CollectionKeys
# Built-in collections whose membership the hook decides (by what a tensor is), never their
# regexes: a layer called "bias_add" must not land in "biases".
_ROLE_ONLY = frozenset({K.WEIGHTS, K.BIASES, K.GRADIENTS, K.LAYERS, K.OPTIMIZER_VARIABLES})
# Collections whose tensors only exist inside the step function.
_CAPTURED_ROLES = frozenset({K.GRADIENTS, K.LAYERS, K.INPUTS, K.OUTPUTS})
# Collections whose tensors the hook finds outside the step function.
_OUTSIDE_ROLES = frozenset({K.WEIGHTS, K.BIASES, K.OPTIMIZER_VARIABLES, K.LOSSES, K.METRICS,
                            K.SM_METRICS})
_MODE_OF_KIND = {"train": ModeKeys.TRAIN, "test": ModeKeys.EVAL, "predict": ModeKeys.PREDICT}


def _python_logs(outputs: dict) -> dict[str, float]:
    """Scalar entries of a step's output dict as floats (what Keras shows as batch logs)."""
    logs = {}
    for key, value in outputs.items():
        try:
            arr = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
        except Exception:
            continue
        if arr.size == 1 and arr.dtype.kind in "biuf":
            logs[key] = float(arr.reshape(-1)[0])
    return logs


class _StepStart(Capture):
    """The Keras hook's side of a step: its per-step state is emptied as each step begins (it
    writes what it finds as it goes, so there is nothing else to capture or flush)."""

    def __init__(self, began: Callable[[], None]) -> None:
        super().__init__()
        self.began = began

    def step_began(self) -> None:
        self.began()


class KerasHook(HookCore, Keras2CallbackProtocol, keras.callbacks.Callback):
    """Save tensors of a Keras model: ``model.fit(..., callbacks=[hook])``, for Keras 3 and for
    Keras 2 models from ``tf_keras`` alike."""

    framework = "tensorflow"
    keep_tf_suffix = True
    adapter_collections = _ROLE_ONLY | _CAPTURED_ROLES | _OUTSIDE_ROLES
    detects_non_finite = True  # in fit/evaluate/predict steps (docs/live.md)

    @hook_constructor()
    def __init__(self, shared: dict[str, Any]) -> None:
        HookCore.__init__(self, **shared)
        keras.callbacks.Callback.__init__(self)
        self._roles: dict[str, str] = {}
        self._layer_of: dict[str, str] = {}
        self._layer_patterns: tuple[list[str], list[re.Pattern[str]]] = ([], [])
        self._written: set[str] = set()
        self._watch = NonFiniteWatch(self) if self.arguments.detect_non_finite else None
        self._session = cap.CaptureSession(
            wants=self._wants, on_layer_call=self._on_layer_call, on_step_data=self._capture_data,
            on_failure=self._instrumentation_failed,
            new_check=None if self._watch is None else self._watch.new_check)
        self._open_batch: int | None = None  # Keras' batch index of the step in progress
        self._loops: list[str] = []  # Keras loops in progress: ["train", "test"] in validation
        self._attachment = Attachment(self._session)
        self._warned: set[str] = set()
        self.collections_configured()

    # -- workers ------------------------------------------------------------------------------

    @staticmethod
    def _tf_config() -> dict:
        try:
            return json.loads(os.environ.get("TF_CONFIG") or "{}")
        except json.JSONDecodeError:
            return {}

    @staticmethod
    def _horovod():
        hvd = sys.modules.get("horovod.tensorflow") or sys.modules.get("horovod.tensorflow.keras")
        try:
            return hvd if hvd is not None and hvd.size() > 0 else None
        except Exception:  # not initialized
            return None

    def _worker_name(self) -> str:
        hvd = self._horovod()
        if hvd is not None:
            return f"worker_{hvd.rank()}"
        config = self._tf_config()
        task, cluster = config.get("task") or {}, config.get("cluster") or {}
        if task and sum(len(v) for v in cluster.values()) > 1:
            return f"{task.get('type', 'worker')}_{task.get('index', 0)}"
        return "worker_0"

    def _num_workers(self) -> int:
        hvd = self._horovod()
        if hvd is not None:
            return int(hvd.size())
        cluster = self._tf_config().get("cluster") or {}
        n = sum(len(cluster.get(k, [])) for k in ("chief", "worker"))
        return max(n, 1)

    def _chief_worker_name(self) -> str:
        cluster = self._tf_config().get("cluster") or {}
        return "chief_0" if cluster.get("chief") and self._horovod() is None else "worker_0"

    # -- collections: smdebug's TF Collection (add_keras_layer, add_variable, add_tensor...) ---

    def collections_configured(self) -> None:
        for coll in self.collection_manager.collections.values():
            as_tf_collection(coll)

    def get_collection(self, name: str, create: bool = True) -> TFCollection:
        return as_tf_collection(super().get_collection(name, create))

    def get_collections(self) -> dict[str, TFCollection]:
        self.collections_configured()  # (one a script added to the manager itself, too)
        return super().get_collections()  # type: ignore[return-value]

    # -- which collections a tensor belongs to -------------------------------------------------

    def _set_role(self, name: str, collection: str) -> None:
        if self._roles.get(name) != collection:
            self._roles[name] = collection
            self.plans.forget(name)

    def _variable_role(self, name: str) -> str:
        biases = self.collection_manager.get(K.BIASES, create_if_not_exists=True)
        return K.BIASES if biases.matches(name) else K.WEIGHTS

    def _layer_regexes(self, coll: Collection) -> list[re.Pattern[str]]:
        regexes, patterns = self._layer_patterns
        if regexes != coll.include_regex:
            patterns = [re.compile(r) for r in coll.include_regex]
            self._layer_patterns = (list(coll.include_regex), patterns)
        return patterns

    def _collections_of(self, included: list[Collection], name: str) -> list[Collection]:
        role = self._roles.get(name)
        found = []
        for c in included:
            if c.name in _ROLE_ONLY:
                ok = role == c.name or name in c.tensor_names
                if ok and c.name == K.LAYERS and c.include_regex and name not in c.tensor_names:
                    layer = self._layer_of.get(name, "")
                    ok = any(p.search(name) or p.search(layer) for p in self._layer_regexes(c))
            else:
                ok = role == c.name or c.matches(name)
            if ok:
                found.append(c)
        return found

    def _wants(self, name: str) -> bool:
        """Could `name` be saved in some step (schedule ignored)? Decides what gets captured."""
        if self.disabled:
            return False
        if not self.prepared:
            self._prepare_collections()
        return bool(self.plans.matching(name))

    def _may_capture(self) -> bool:
        """Whether any included collection can hold a tensor that exists only inside a step."""
        if not self.prepared:
            self._prepare_collections()
        for c in self.plans.included:
            if c.name in _CAPTURED_ROLES:
                return True
            if c.name not in _OUTSIDE_ROLES and (c.include_regex or c.tensor_names):
                return True
        return False

    def _step_needs_capture(self, fns: cap.StepFunctions) -> bool:
        if fns.failed:
            return False
        plans = self.plans
        if fns.names is not None:
            return any(
                any(id(c) in plans.saving_ids for c in plans.matching(n)) for n in fns.names)
        for c in plans.saving:
            if c.name in _CAPTURED_ROLES:
                return True
            if c.name not in _OUTSIDE_ROLES and (c.include_regex or c.tensor_names):
                return True
        return False

    def report_unmatched(self, first_only: bool) -> None:
        # metrics, losses and sm_metrics are always included; a model compiled without metrics,
        # a predict-only run or no save_scalar(..., sm_metric=True) leaves them empty, which is
        # normal, not a configuration mistake worth a warning.
        for name in (K.METRICS, K.LOSSES, K.SM_METRICS):
            coll = self.collection_manager.get(name, create_if_not_exists=True)
            if not coll.include_regex:
                self.allow_unmatched(name)
        super().report_unmatched(first_only)

    # -- steps ----------------------------------------------------------------------------------

    def _prepare_collections_for_tf2(self) -> None:
        """smdebug's TF2 name for preparing the collections before the first step."""
        self.prepare_collections()

    def step_capture(self) -> Capture:
        return _StepStart(self._new_step)

    def _new_step(self) -> None:
        """A step began: what the step before wrote and captured is forgotten."""
        self._written.clear()
        self._session.captured = {}
        self._session.step_outputs = None
        self._session.check = None

    def _write_tf(self, name: str, value: Any) -> None:
        """Save a TF tensor or variable under `name` if this step wants it (once per step)."""
        if name in self._written:
            return
        plan = self.plan(name)
        if plan is None:
            return
        self._written.add(name)
        tensor = self._as_tensor(value)
        need_raw = plan.save_raw or (plan.histogram and self.side_outputs.raw_wanted)
        raw = tensor.numpy() if need_raw else None
        self.write(plan, raw=raw, reductions=tf_reductions(tensor, plan.reductions),
                   shape=tuple(int(d) for d in tensor.shape))

    @staticmethod
    def _as_tensor(value: Any) -> tf.Tensor:
        if isinstance(value, tf.IndexedSlices):
            return tf.convert_to_tensor(value)
        if isinstance(value, keras.Variable):
            return tf.convert_to_tensor(value.value)
        if isinstance(value, tf.Variable):
            return tf.convert_to_tensor(value)
        if isinstance(value, tf.Tensor):
            return value
        return tf.convert_to_tensor(np.asarray(value))

    def _to_numpy(self, value) -> np.ndarray:
        if isinstance(value, (tf.Tensor, tf.Variable, tf.IndexedSlices, keras.Variable)):
            return np.asarray(self._as_tensor(value).numpy())
        return super()._to_numpy(value)

    def _save_variables(self, model) -> None:
        """Weights, biases and optimizer variables, read before the step updates them."""
        for v in model.weights:
            name = variable_name(v)
            self._set_role(name, self._variable_role(name))
            self._write_tf(name, v)
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None:
            self._save_optimizer_variables(optimizer)

    def _save_optimizer_variables(self, optimizer) -> None:
        """In TRAIN steps, read before the optimizer updates them (smdebug: in TRAIN only)."""
        if self.mode != ModeKeys.TRAIN:
            return
        variables = flavor_of(optimizer).optimizer_variables(optimizer)
        if not variables:
            # Keras 2 optimizers make their variables at the first update: none to save yet
            self.allow_unmatched(K.OPTIMIZER_VARIABLES)
        for v in variables:
            name = variable_name(v)
            self._set_role(name, K.OPTIMIZER_VARIABLES)
            self._write_tf(name, v)

    def _save_logs(self, logs: dict | None) -> None:
        for key, value in (logs or {}).items():
            if key == "outputs" or not isinstance(value, (int, float, np.number, np.ndarray, tf.Tensor)):
                continue
            self._set_role(key, log_key_collection(key))
            plan = self.plan(key)
            if plan is not None and key not in self._written:
                self._written.add(key)
                arr = self._to_numpy(value) if isinstance(value, tf.Tensor) else to_numpy_value(value)
                self.write(plan, raw=np.array(arr, copy=True), shape=arr.shape)

    def _force_save_logs(self, logs: dict | None, keys: list[str]) -> None:
        """Save epoch-level values (``val_loss``...) into the current step whatever the step
        schedule says, as smdebug did; a collection configured off (end_step=0) stays off."""
        if not keys or self.step < 0 or self.disabled:
            return
        if not self.prepared:
            self._prepare_collections()
        wrote = False
        for key in keys:
            value = logs[key]
            if not isinstance(value, (int, float, np.number)):
                continue
            self._set_role(key, log_key_collection(key))
            colls = [c for c in self.plans.matching(key)
                     if c.save_config.get_save_config(self.mode).end_step != 0]
            if not colls:
                continue
            for c in colls:
                c.add_tensor_name(key)
                self.plans.matched.add(c.name)
            if self.writes and self.pending_step is None:
                self.scalar_pending_step()
            arr = to_numpy_value(value)
            self.write(TensorPlan(key, save_raw=True, tb_scalar=True, collections=colls),
                       raw=arr, shape=arr.shape)
            wrote = True
        if wrote:
            self.end_step()

    # -- tensors reported from inside steps -------------------------------------------------------

    def _capturing_eagerly(self) -> bool:
        """Outside Keras' loops, eager calls in a saving step are written directly."""
        return (not self._loops and self.saving_this_step and not self.disabled
                and tf.executing_eagerly())

    def _record(self, name: str, value: Any) -> None:
        if self._session.active is not None:
            self._session.active.add(name, value)
        elif self._capturing_eagerly() and isinstance(value, (tf.Tensor, tf.IndexedSlices)):
            self._write_tf(name, value)

    def _on_layer_call(self, layer, is_root: bool, args, kwargs, outputs) -> None:
        if self._session.active is None and not self._capturing_eagerly():
            return
        with self.failsafe("layer call"):
            inputs = args[0] if args else kwargs.get("inputs")
            ins, outs = cap.tensors_of(inputs), cap.tensors_of(outputs)
            check = None if self._session.active is None else self._session.active.check
            if is_root:
                for n, t in zip(structure_names("predictions", outputs, len(outs)), outs,
                                strict=True):
                    self._set_role(n, K.OUTPUTS)
                    self._record(n, t)
                    if check is not None:
                        check.add("forward", "", n, t)
                if self._session.active is None:  # an eager call of a registered model
                    for n, t in zip(structure_names("inputs", inputs, len(ins)), ins,
                                    strict=True):
                        self._set_role(n, K.INPUTS)
                        self._record(n, t)
                return
            for kind, tensors in (("input", ins), ("output", outs)):
                prefix = layer_tensor_prefix(layer.name, kind)
                for n, t in zip(indexed_names(prefix, len(tensors)), tensors, strict=True):
                    self._set_role(n, K.LAYERS)
                    self._layer_of[n] = layer.name
                    self._record(n, t)
                    if check is not None and kind == "output":
                        check.add("forward", layer.name, n, t)

    def _on_apply_gradients(self, optimizer, grads, variables) -> None:
        if self._session.active is None and not self._capturing_eagerly():
            return
        with self.failsafe("optimizer.apply"):
            grads, variables = list(grads), list(variables or [])
            flavor = flavor_of(optimizer)
            active = self._session.active
            check = None if active is None or skips_overflows(optimizer) else active.check
            for g, v in zip(grads, variables, strict=False):
                if g is None:
                    continue
                name = gradient_name(v)
                self._set_role(name, K.GRADIENTS)
                if active is None or active.captures:
                    self._record(name, flavor.unscaled_gradient(optimizer, g))
                if check is not None:
                    check.gradient(v, g, name)
            if self._session.active is None:  # a custom loop: the optimizer's own variables too
                self._save_optimizer_variables(optimizer)

    def _capture_data(self, capture: cap.Capture, kind: str, data) -> None:
        """Model inputs (``inputs``) and labels (``labels``) of an instrumented step, as smdebug
        saved them from the Keras step: rank-1 tensors as ``(N, 1)`` (the step's
        ``expand_1d``), and a dict or list indexed even when it holds one tensor."""
        with self.failsafe("step data"):
            x, y, _ = flavor_of(self._attachment.model).unpack_data(data)
            for role, prefix, value in ((K.INPUTS, "inputs", x), (K.OUTPUTS, "labels", y)):
                tensors = [cap.expand_1d(t) for t in cap.tensors_of(value)]
                names = structure_names(prefix, value, len(tensors))
                for n, t in zip(names, tensors, strict=True):
                    self._set_role(n, role)
                    capture.add(n, t)

    def _instrumentation_failed(self, kind: str, error: BaseException, captures: bool) -> None:
        if not captures:
            logger.error("smdebug-lite could not build the checked Keras %s step (%s: %s); "
                         "detect_non_finite does not check this mode", kind,
                         type(error).__name__, error)
            return
        logger.error(
            "smdebug-lite could not build the instrumented Keras %s step (%s: %s); gradients and "
            "layer tensors will not be saved in this mode, everything else still is",
            kind, type(error).__name__, error)

    # -- attaching to a model -------------------------------------------------------------------

    def _enter_keras(self, kind: str) -> None:
        if self._loops and (kind == "train" or self._loops[-1] != "train"):
            # Only validation nests (evaluate inside fit). Anything else means a loop that
            # raised never reached its *_end callback: start clean.
            self._finish_step()
            self._safe_detach()
        self._loops.append(kind)
        if len(self._loops) > 1 or self.model is None:
            return
        model = self.model
        self._attachment.attach(model)
        for v in model.weights:
            name = variable_name(v)
            self._set_role(name, self._variable_role(name))
        if self._may_capture() or self._watch is not None:
            self._patch_model(model)
            self._attachment.install_step_dispatchers(model)

    def _patch_model(self, model) -> None:
        layers = model._flatten_layers(include_self=True, recursive=True)
        for layer in layers:
            self._attachment.patch_layer(layer, is_root=layer is model)
        optimizer = getattr(model, "optimizer", None)
        self._attachment.patch_optimizer(optimizer, self._on_apply_gradients)

    def _exit_keras(self, kind: str) -> None:
        self._finish_step()
        if kind == "train" and self._watch is not None:
            self._watch.check_variables(self._attachment.model)  # (after the loop's last update)
        if self._loops:
            self._loops.pop()
        if not self._loops:
            self._attachment.detach()

    def _select_function(self, kind: str) -> None:
        """Run this step with the instrumented function only if it saves captured tensors."""
        model = self._attachment.model
        if model is None:
            return
        fns = self._attachment.install_function(model, kind)
        if fns is None:
            return
        instrumented = f"_smd_original_{kind}_step" in model.__dict__
        fns.use_runner = (instrumented and self.saving_this_step
                          and self._step_needs_capture(fns))
        watch = self._watch
        fns.use_checked = (instrumented and not fns.use_runner and watch is not None
                           and not watch.done and not fns.checked_failed)
        if fns.use_runner and fns.runner is None:
            fns.runner = cap.build_runner(model, kind, self._session, fns,
                                          flavor_of(model).trainer_module)
        if fns.use_checked and fns.checked is None:
            fns.checked = cap.build_runner(model, kind, self._session, fns,
                                           flavor_of(model).trainer_module, captures=False)

    # -- Keras callback interface -------------------------------------------------------------------
    #
    # Only *_begin methods are implemented: where Keras dispatches batch ends asynchronously
    # (backends it deems thread safe), a callback with batch-end methods turns that off and
    # syncs the device every step. A step is finished at the next batch's begin, or when its
    # loop ends, from the step function's outputs (kept by a thin wrapper) and the captured
    # tensors; the logs are read from the device only for steps that save them.

    def _batch_begin(self, kind: str, batch: int) -> None:
        if self.disabled:
            return
        with self.failsafe(f"on_{kind}_batch_begin"):
            self._finish_step()
            self.set_mode(_MODE_OF_KIND[kind])
            self.start_step()
            self._open_batch = batch
            model = self._attachment.model
            if self.saving_this_step and model is not None:
                self._save_variables(model)
            self._select_function(kind)

    def _finish_step(self) -> None:
        """Write what the step that just ran produced: captured tensors and its batch logs, with
        Keras' batch index as the ``batch`` metric (smdebug saved it with every step's logs)."""
        batch, self._open_batch = self._open_batch, None
        if batch is None:
            return
        session = self._session
        captured, session.captured = session.captured, {}
        outputs, session.step_outputs = session.step_outputs, None
        check, session.check = session.check, None
        if self._watch is not None and not self.disabled:
            self._watch.step_checked(check, (self.step, self.mode.name, self.mode_step))
        if self.saving_this_step and not self.disabled:
            for name, tensor in captured.items():
                self._write_tf(name, tensor)
            logs = {}
            if isinstance(outputs, dict) and self.mode != ModeKeys.PREDICT:
                logs = _python_logs(outputs)
            self._save_logs({**logs, "batch": batch})
        self.end_step()

    def _mode_begin(self, kind: str) -> None:
        if self.disabled:
            return
        with self.failsafe(f"on_{kind}_begin"):
            self._finish_step()  # validation begins: the last training step is complete
            self._enter_keras(kind)

    def _mode_end(self, kind: str) -> None:
        if self.disabled:
            self._safe_detach()
            return
        with self.failsafe(f"on_{kind}_end"):
            self._exit_keras(kind)

    def set_model(self, model) -> None:
        super().set_model(model)
        early = flavor_of(model).early_step_functions
        if self.disabled or not early or self._loops:
            return
        with self.failsafe("set_model"):
            attached = self._attachment.model
            if attached is not None and attached is not model:
                self._attachment.detach()
            self._attachment.attach(model)
            for kind in early:
                if getattr(model, f"{kind}_function", None) is None:
                    getattr(model, f"make_{kind}_function")()
                self._attachment.install_function(model, kind)

    def on_train_begin(self, logs=None):
        self._mode_begin("train")

    def on_train_end(self, logs=None):
        self._mode_end("train")

    def on_test_begin(self, logs=None):
        self._mode_begin("test")

    def on_test_end(self, logs=None):
        self._mode_end("test")

    def on_predict_begin(self, logs=None):
        self._mode_begin("predict")

    def on_predict_end(self, logs=None):
        self._mode_end("predict")

    def on_train_batch_begin(self, batch, logs=None):
        self._batch_begin("train", batch)

    def on_test_batch_begin(self, batch, logs=None):
        self._batch_begin("test", batch)

    def on_predict_batch_begin(self, batch, logs=None):
        self._batch_begin("predict", batch)

    def on_epoch_end(self, epoch, logs=None):
        if self.disabled:
            return
        with self.failsafe("on_epoch_end"):
            self._finish_step()
            logs = logs or {}
            keys = [k for k in logs if k.startswith("val_")]
            if self.mode == ModeKeys.TRAIN:
                # An epoch without validation ends in its last training step, which gets the
                # epoch's logs as smdebug saved them (those the step saved already are the
                # same running means).
                keys += [k for k in logs if not k.startswith("val_") and k not in self._written]
            self._force_save_logs(logs, keys)

    # -- custom training loops (eager) --------------------------------------------------------------

    def wrap_tape(self, tape: tf.GradientTape) -> tf.GradientTape:
        """Make `tape` start a step when entered and save what ``tape.gradient`` computes:
        gradients, the variables' values (before the optimizer updates them) and a scalar
        target as ``loss``. Works when the step runs eagerly."""
        return hook_tape(tape, TapeCallbacks(self._tape_step_begin, self._tape_gradient))

    def wrap_optimizer(self, optimizer):
        """Save gradients whenever ``optimizer.apply``/``apply_gradients`` runs eagerly."""
        with self.failsafe("wrap_optimizer"):
            if self._attachment.patch_optimizer(optimizer, self._on_apply_gradients):
                self._attachment.register(optimizer)
        return optimizer

    def register_model(self, model) -> None:
        """Save layer inputs/outputs (and model predictions) of eager calls of `model` in custom
        loops. ``fit``/``evaluate``/``predict`` need no registration."""
        with self.failsafe("register_model"):
            for v in model.weights:
                name = variable_name(v)
                self._set_role(name, self._variable_role(name))
            for layer in model._flatten_layers(include_self=True, recursive=True):
                self._attachment.patch_layer(layer, is_root=layer is model)
                self._attachment.register(layer)

    def _tape_step_begin(self) -> None:
        if self.disabled:
            return
        with self.failsafe("GradientTape.__enter__"):
            if self.mode == ModeKeys.GLOBAL:
                self.set_mode(ModeKeys.TRAIN)
            self.start_step()

    def _tape_gradient(self, target, sources, grads) -> None:
        if self.disabled:
            return
        with self.failsafe("GradientTape.gradient"):
            self._save_tape_gradients(target, sources, grads)

    def _save_tape_gradients(self, target, sources, grads) -> None:
        if not tf.executing_eagerly():
            if "tape-graph" not in self._warned:
                self._warned.add("tape-graph")
                logger.warning("wrap_tape: tape.gradient ran inside a tf.function, where values "
                               "are symbolic; return the gradients from the function and call "
                               "hook.save_gradients(grads, variables) outside it")
            return
        self.save_gradients(tf.nest.flatten(grads), tf.nest.flatten(sources))
        if isinstance(target, tf.Tensor) and target.shape.num_elements() == 1:
            self._set_role("loss", K.LOSSES)
            self._write_tf("loss", target)

    def save_gradients(self, grads, variables=None) -> None:
        """Save gradients (and the variables' current values) in the current step:
        ``save_gradients(grads, variables)`` or ``save_gradients(zip(grads, variables))``."""
        with self.failsafe("save_gradients"):
            if variables is None:
                pairs = list(grads)
            else:
                pairs = list(zip(grads, variables, strict=False))
            for g, v in pairs:
                if not isinstance(v, (tf.Variable, keras.Variable)) or \
                        flavor_of(v).is_rng_state(v):
                    continue
                wname = variable_name(v)
                self._set_role(wname, self._variable_role(wname))
                self._write_tf(wname, v)
                if g is not None:
                    gname = gradient_name(v)
                    self._set_role(gname, K.GRADIENTS)
                    self._write_tf(gname, g)

    # -- shutdown -----------------------------------------------------------------------------------

    def _safe_detach(self) -> None:
        try:
            self._loops = []
            self._attachment.release()
        except Exception as e:  # never let cleanup break training
            logger.warning("smdebug-lite could not restore the Keras model: %s", e)

    def disable(self, where: str, error: BaseException) -> None:
        """After an internal error the model runs exactly as Keras built it."""
        super().disable(where, error)
        self._safe_detach()

    def close(self) -> None:
        if not self.disabled:
            with self.failsafe("close"):
                self._finish_step()
        self._safe_detach()
        super().close()


__all__ = ["KerasHook"]
