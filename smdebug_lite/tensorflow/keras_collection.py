"""The Keras hook's collections: they also take TF objects and Keras layers, as smdebug's TF
``Collection`` did (``smdebug.tensorflow.collection`` re-exports this class).

smdebug's TF ``Collection`` kept a registry of graph tensors (``TensorRef``) for its session
hook. TensorFlow 2.16+ runs eagerly, so here ``add``/``add_variable``/``add_tensor``/
``add_keras_layer`` turn what they are given into what the Keras hook matches: the tensor names
it saves (``<variable path>:0``) and regexes for a layer's ``<layer>/inputs`` and
``<layer>/outputs``. An eager tensor has no name; adding one is reported and ignored, as smdebug
did in eager mode.
"""

from __future__ import annotations

import re
from typing import Any

import keras
import tensorflow as tf

from smdebug_lite.config.collection import Collection as _BaseCollection
from smdebug_lite.config.collection import CollectionKeys
from smdebug_lite.log.logger import get_logger
from smdebug_lite.tensorflow.naming import layer_tensor_prefix, variable_name

logger = get_logger(__name__)


def _is_variable(arg: Any) -> bool:
    # (tf.Variable covers mirrored and other distributed variables, and Keras 2's)
    return isinstance(arg, (tf.Variable, keras.Variable))


def _graph_name(tensor: Any) -> str | None:
    """A symbolic tensor's name; None for an eager tensor (TF refuses to name those)."""
    try:
        name = tensor.name
    except (AttributeError, ValueError):
        return None
    return name if isinstance(name, str) and name else None


class Collection(_BaseCollection):
    """A collection with smdebug's TF ``add*`` methods (see the module docstring)."""

    def add(self, arg: Any) -> None:
        self.add_for_mode(arg)

    def add_for_mode(self, arg: Any, mode: Any = None) -> None:
        """Add a variable, a named tensor, an operation's outputs, or a list/set of those.
        `mode` is accepted for smdebug's signature: a name is saved in every mode."""
        if isinstance(arg, (list, tuple, set)):
            for item in arg:
                self.add_for_mode(item, mode)
        elif _is_variable(arg):
            self.add_variable(arg, mode=mode)
        elif isinstance(arg, tf.Operation):
            self.add_operation(arg, mode=mode)
        elif isinstance(arg, tf.Tensor):
            self.add_tensor(arg, mode=mode)
        else:
            logger.warning(
                f"Collection {self.name!r}: cannot add {arg!r} ({type(arg).__name__}); expected "
                "a tf.Variable, keras.Variable, named tf.Tensor, tf.Operation or a list of them"
            )

    def add_variable(
        self, arg: Any, export_name: str | None = None, mode: Any = None,
        original_tensor: Any = None,
    ) -> None:
        """Save the variable under `export_name`, else the name the Keras hook gives it."""
        self.add_tensor_name(export_name or variable_name(arg))

    def add_distributed_variable(
        self, arg: Any, export_name: str | None = None, mode: Any = None
    ) -> None:
        self.add_variable(arg, export_name=export_name, mode=mode)

    def add_aggregating_variable(self, arg: Any, name: str | None = None, mode: Any = None) -> None:
        self.add_variable(arg, export_name=name, mode=mode)

    def add_tensor(self, arg: Any, name: str | None = None, mode: Any = None) -> None:
        """Save a tensor under `name`, else its graph name; an unnamed eager tensor is skipped."""
        name = name or _graph_name(arg)
        if name is None:
            logger.warning(
                f"Collection {self.name!r}: an eager tensor has no name to match; pass "
                "name=..., or save the value with hook.save_tensor(name, value)"
            )
            return
        self.add_tensor_name(name)

    def add_operation(self, arg: Any, mode: Any = None) -> None:
        for tensor in arg.outputs:
            self.add_tensor(tensor, mode=mode)

    def add_keras_layer(self, layer: Any, inputs: bool = False, outputs: bool = True) -> None:
        """Save the layer's inputs and/or outputs (``<layer>/inputs``, ``<layer>/outputs`` and
        their ``_<i>`` forms for several tensors)."""
        name = layer if isinstance(layer, str) else layer.name
        for kind, wanted in (("input", inputs), ("output", outputs)):
            if wanted:
                self.include(f"^{re.escape(layer_tensor_prefix(name, kind))}(_\\d+)?$")

    def get_export_names_of_tensors(self) -> set[str]:
        return self.tensor_names


def as_tf_collection(coll: _BaseCollection) -> Collection:
    """Give a collection made elsewhere (the shared manager's, a loaded file's) the TF methods,
    in place."""
    if not isinstance(coll, Collection):
        coll.__class__ = Collection
    return coll  # type: ignore[return-value]


__all__ = ["Collection", "CollectionKeys", "as_tf_collection"]
