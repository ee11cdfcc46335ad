"""``smdebug.tensorflow.utils``: the helpers smdebug's TF hooks and tests used.

Version predicates are evaluated against the installed TensorFlow, so on 2.16+ the ones for old
releases (``is_tf_version_2_2_x`` ...) answer False. Where smdebug's answer depended on TF1 or
Keras 2 internals it no longer finds, the helper answers for TensorFlow 2.16+:
``supported_tf_variables`` is ``(tf.Variable, keras.Variable)`` and ``is_keras_optimizer``
recognises Keras 3 and ``tf_keras`` optimizers. The session helpers (``build_fetches_tuple``,
``get_original_fetch_ops``) raise SMDebugNotImplementedError naming ``tf.compat.v1.Session``.
Graph helpers that only walk a GraphDef or ``op.inputs`` still work.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, NoReturn

import keras
import tensorflow as tf
from packaging import version

from smdebug_lite.exceptions import SMDebugError, SMDebugNotImplementedError
from smdebug_lite.modes import ModeKeys
from smdebug_lite.tensorflow.naming import layer_tensor_prefix

TF_VERSION = version.parse(tf.__version__)
# The oldest TensorFlow smdebug-lite supports (smdebug had an upper bound, 2.12, instead).
MIN_SUPPORTED_TF_VERSION = version.parse("2.16.0")


def _between(low: str, high: str | None = None) -> bool:
    return version.parse(low) <= TF_VERSION and (high is None or TF_VERSION < version.parse(high))


def is_tf_version_2x() -> bool:
    return _between("2.0.0")


def is_tf_version_1_15_x() -> bool:
    return _between("1.15.0", "2.0.0")


def is_tf_version_2_2_x() -> bool:
    return _between("2.2.0", "2.3.0")


def is_tf_version_2_3_x() -> bool:
    return _between("2.3.0", "2.4.0")


def is_tf_version_2_4_x() -> bool:
    return _between("2.4.0", "2.5.0")


def is_tf_version_greater_than_2_4_x() -> bool:
    return _between("2.4.0")


def is_profiler_supported_for_tf_version() -> bool:
    return _between("2.2.0")


def does_tf_support_mixed_precision_training() -> bool:
    """smdebug's window for its own mixed-precision handling (TF 2.1 to 2.5); False on 2.16+,
    where the Keras hook handles mixed precision itself."""
    return _between("2.1.0", "2.6.0")


def is_current_version_supported(tf_version: str = tf.__version__) -> bool:
    """Whether smdebug-lite's Keras hook supports this TensorFlow version (2.16 or later)."""
    return version.parse(tf_version) >= MIN_SUPPORTED_TF_VERSION


def get_current_version() -> version.Version:
    return version.parse(tf.__version__)


def supported_tf_variables() -> tuple[type, ...]:
    """Classes whose instances are model variables on TF 2.16+ (for ``isinstance``)."""
    return (tf.Variable, keras.Variable)


# -- model inputs and outputs the Keras hook saves --------------------------------------------


class ModelOutput:
    LABELS = "smdebug_y"
    PREDICTIONS = "smdebug_y_pred"
    VAL_LABELS = "val_smdebug_y"
    VAL_PREDICTIONS = "val_smdebug_y_pred"


ModelOutputs = {
    ModelOutput.LABELS,
    ModelOutput.PREDICTIONS,
    ModelOutput.VAL_LABELS,
    ModelOutput.VAL_PREDICTIONS,
}

_OUTPUT_EXPORT_NAMES = {
    ModelOutput.LABELS: "labels",
    ModelOutput.VAL_LABELS: "labels",
    ModelOutput.PREDICTIONS: "predictions",
    ModelOutput.VAL_PREDICTIONS: "predictions",
}


def get_model_output_export_name(key: str) -> str:
    """The saved name of a model output key; KeyError for other keys, as in smdebug."""
    return _OUTPUT_EXPORT_NAMES[key]


class ModelInput:
    INPUTS = "smdebug_x"


ModelInputs = {ModelInput.INPUTS}


def get_model_input_export_name() -> str:
    return "model_input"


class TFDistributionStrategy(Enum):
    NONE = 0
    HOROVOD = 1
    MIRRORED = 2
    PARAMETER_SERVER = 3
    SMDATAPARALLEL = 4
    UNSUPPORTED = 100


# -- TF_CONFIG (multi-worker clusters) ---------------------------------------------------------


def load_tf_config_json(tf_config: str | None) -> dict | None:
    """The parsed TF_CONFIG text; None when it is missing or not JSON."""
    try:
        return json.loads(tf_config)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def is_parameter_server_strategy(tf_config_json: Any) -> bool:
    """Whether a parsed TF_CONFIG describes a cluster with parameter servers."""
    if not isinstance(tf_config_json, dict):
        return False
    cluster = tf_config_json.get("cluster")
    return isinstance(cluster, dict) and "ps" in cluster


def get_worker_id_from_tf_config(tf_config_json: dict) -> str:
    """``<task type>_<task index>``: ``chief_0``, ``worker_2``, ``ps_1``, ``evaluator_0``."""
    task = tf_config_json["task"]
    return f"{task['type']}_{task['index']}"


def get_num_workers_from_tf_config(tf_config_json: dict) -> int:
    """Training workers: the cluster's workers plus its chief (parameter servers and the
    evaluator do not train). The dict is not modified (smdebug appended the chief to it)."""
    cluster = tf_config_json["cluster"]
    return len(cluster["worker"]) + len(cluster.get("chief", []))


def get_chief_worker_from_tf_config(tf_config_json: dict) -> str:
    """``chief_0``; without a chief, worker 0 takes that role in TensorFlow (smdebug raised
    "Not implemented")."""
    return "chief_0" if "chief" in tf_config_json["cluster"] else "worker_0"


def is_mirrored_strategy(strat: Any) -> bool:
    return isinstance(
        strat, (tf.distribute.MirroredStrategy, tf.compat.v1.distribute.MirroredStrategy)
    )


# -- tensors, optimizers, Keras layers ----------------------------------------------------------


def is_valid_tf_tensor(grad: Any) -> bool:
    """An eager tensor (one with a value to save)."""
    return isinstance(grad, tf.Tensor) and hasattr(grad, "numpy")


def is_IndexedSlices(grad: Any) -> bool:  # noqa: N802 (smdebug's name)
    return isinstance(grad, tf.IndexedSlices)


def is_keras_optimizer(obj: Any) -> bool:
    """A Keras 3 optimizer, or a Keras 2 one when ``tf_keras`` is in use."""
    if isinstance(obj, keras.optimizers.Optimizer):
        return True
    tf_keras = sys.modules.get("tf_keras")  # (not imported here: only if the user did)
    if tf_keras is None:
        return False
    classes = [tf_keras.optimizers.Optimizer]
    legacy = getattr(tf_keras.optimizers, "legacy", None)
    if legacy is not None:
        classes.append(legacy.Optimizer)
    return isinstance(obj, tuple(classes))


def get_export_name_for_keras(layer: Any, tensor_type: str, tensor: Any = None) -> str | None:
    """``<layer>/<type>s`` for a layer name (the eager form the Keras hook saves), or
    ``<layer>/<type>s/<tensor name>`` for a layer object and a named tensor; None for a type
    other than input, output or weight."""
    if tensor_type not in ("input", "output", "weight"):
        return None
    if isinstance(layer, str):
        return layer_tensor_prefix(layer, tensor_type)
    return f"{layer_tensor_prefix(layer.name, tensor_type)}/{tensor.name}"


def _node_tensors(layer: Any, getter: str, attribute: str) -> list[Any]:
    """Every tensor of every call of a functional-model layer, in call order."""
    per_call = getattr(layer, getter, None)
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if per_call is not None:  # tf_keras
        per_call(0)  # raises if the layer was never called, as in smdebug
        calls = [per_call(i) for i in range(len(nodes))]
    else:  # Keras 3
        if not nodes:
            raise SMDebugError(f"layer {layer.name!r} has not been called on symbolic inputs")
        calls = [getattr(node, attribute) for node in nodes]
    out: list[Any] = []
    for tensors in calls:
        out.extend(tensors if isinstance(tensors, (list, tuple)) else [tensors])
    return out


def get_keras_layer_inputs(layer: Any) -> list[Any]:
    return _node_tensors(layer, "get_input_at", "input_tensors")


def get_keras_layer_outputs(layer: Any) -> list[Any]:
    return _node_tensors(layer, "get_output_at", "output_tensors")


def get_keras_mode(mode: ModeKeys) -> str | None:
    """Keras' mode string for a smdebug mode (``"train"``, ``"test"``, ``"predict"``)."""
    return {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "test", ModeKeys.PREDICT: "predict"}.get(mode)


def get_non_device_tensors(tensor_refs: Iterable[Any]) -> list[Any]:
    """The references whose TF object is not placed on a device."""
    return [ref for ref in tensor_refs if not ref.tf_obj.device]


HookFn = Callable[..., Any]


class LayerWithHooks(keras.layers.Layer):
    """A layer wrapper that passes ``(input, output)`` to each hook; a hook's non-None return
    value replaces the output."""

    def __init__(self, layer: keras.layers.Layer, hooks: list[HookFn] | None = None) -> None:
        super().__init__()
        self._layer = layer
        self._hooks: list[HookFn] = list(hooks or [])

    def call(self, input: Any) -> Any:  # noqa: A002 (smdebug's parameter name)
        output = self._layer(input)
        for hook in self._hooks:
            replaced = hook(input, output)
            if replaced is not None:
                output = replaced
        return output

    def register_hook(self, hook: HookFn) -> None:
        self._hooks.append(hook)


class InputOutputSaver:
    """A layer hook that keeps the last ``layer_input`` and ``layer_output`` it was given."""

    def __init__(self) -> None:
        self.layer_input: Any = None
        self.layer_output: Any = None

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> None:
        self.layer_input = kwargs["layer_input"]
        self.layer_output = kwargs["layer_output"]


def get_layer_call_fn(layer: Any) -> Callable[..., Any]:
    """A replacement for ``layer.call`` that runs ``layer._hooks`` after the original (kept as
    ``layer.old_call``) with ``layer_input=`` and ``layer_output=``; a hook's non-None return
    value replaces the output."""
    original = layer.call
    layer.old_call = original

    def call(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        output = original(inputs, *args, **kwargs)
        for hook in getattr(layer, "_hooks", []):
            replaced = hook(inputs, layer_input=inputs, layer_output=output)
            if replaced is not None:
                output = replaced
        return output

    return call


# -- graphs ---------------------------------------------------------------------------------


def node_name(n: str) -> str:
    """A GraphDef input reference without its ``^`` (control) prefix or ``:<i>`` suffix."""
    return n[1:] if n.startswith("^") else n.split(":")[0]


def extract_graph_summary(graph_def: Any) -> tuple[dict, dict, dict]:
    """(node -> input node names, node name -> NodeDef, node name -> position) of a GraphDef."""
    inputs: dict[str, list[str]] = {}
    nodes: dict[str, Any] = {}
    order: dict[str, int] = {}
    for seq, node in enumerate(graph_def.node):
        name = node_name(node.name)
        nodes[name] = node
        inputs[name] = [node_name(x) for x in node.input]
        order[name] = seq
    return inputs, nodes, order


def tensor_can_be_saved(root_tensor: Any, subgraph_nodes: Any, unfilled_placeholders: Any) -> bool:
    """False when `root_tensor` depends, outside `subgraph_nodes`, on an unfed placeholder
    (an input-less op in `unfilled_placeholders`); walks ``.op.inputs`` breadth first."""
    seen, queue = {id(root_tensor)}, deque([root_tensor])
    while queue:
        tensor = queue.popleft()
        if tensor.op.name in subgraph_nodes:
            continue
        if not tensor.op.inputs and tensor in unfilled_placeholders:
            return False
        for parent in tensor.op.inputs:
            if id(parent) not in seen:
                seen.add(id(parent))
                queue.append(parent)
    return True


def _session_only(name: str) -> NoReturn:
    raise SMDebugNotImplementedError(
        f"{name} works on tf.compat.v1.Session fetches, a TensorFlow 1 API that TensorFlow 2.16 "
        "and later do not run; smdebug-lite's KerasHook needs no fetches"
    )


def build_fetches_tuple(fetches: Any) -> NoReturn:
    _session_only("build_fetches_tuple")


def get_original_fetch_ops(fetches: Any) -> NoReturn:
    _session_only("get_original_fetch_ops")


__all__ = [
    "MIN_SUPPORTED_TF_VERSION",
    "TF_VERSION",
    "InputOutputSaver",
    "LayerWithHooks",
    "ModelInput",
    "ModelInputs",
    "ModelOutput",
    "ModelOutputs",
    "TFDistributionStrategy",
    "build_fetches_tuple",
    "does_tf_support_mixed_precision_training",
    "extract_graph_summary",
    "get_chief_worker_from_tf_config",
    "get_current_version",
    "get_export_name_for_keras",
    "get_keras_layer_inputs",
    "get_keras_layer_outputs",
    "get_keras_mode",
    "get_layer_call_fn",
    "get_model_input_export_name",
    "get_model_output_export_name",
    "get_non_device_tensors",
    "get_num_workers_from_tf_config",
    "get_original_fetch_ops",
    "get_worker_id_from_tf_config",
    "is_IndexedSlices",
    "is_current_version_supported",
    "is_keras_optimizer",
    "is_mirrored_strategy",
    "is_parameter_server_strategy",
    "is_profiler_supported_for_tf_version",
    "is_tf_version_1_15_x",
    "is_tf_version_2_2_x",
    "is_tf_version_2_3_x",
    "is_tf_version_2_4_x",
    "is_tf_version_2x",
    "is_tf_version_greater_than_2_4_x",
    "load_tf_config_json",
    "node_name",
    "supported_tf_variables",
    "tensor_can_be_saved",
]
