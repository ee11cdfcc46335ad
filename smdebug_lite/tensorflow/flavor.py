"""Which Keras a model or optimizer belongs to: Keras 3 (``keras``) or Keras 2 (``tf_keras``).

TensorFlow 2.16+ ships Keras 3 as ``tf.keras``; Keras 2 code keeps running through the ``tf_keras``
package (``TF_USE_LEGACY_KERAS=1`` makes ``tf.keras`` that package). One hook serves both: what
differs between them (how an optimizer applies gradients, where its variables are, how mixed
precision scales gradients) lives in one small adapter module each, ``keras3`` and ``keras2``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol


class KerasFlavor(Protocol):
    """What the hook needs to know about one Keras."""

    name: str
    # Kinds ("train", "test", "predict") whose step function a loop takes before its callbacks'
    # begin: the hook puts its dispatcher in place when Keras hands it the model.
    early_step_functions: tuple[str, ...]
    # The module whose ``reduce_per_replica`` reduces a step's per-replica outputs.
    trainer_module: str

    def patch_optimizer(self, optimizer: Any, on_apply: Callable[..., None]) -> bool:
        """Route the optimizer's gradient application through ``on_apply(optimizer, grads,
        variables)``; False when it is already routed."""

    def unpatch_optimizer(self, optimizer: Any) -> None:
        """Give the optimizer back its own method."""

    def optimizer_variables(self, optimizer: Any) -> list:
        """The optimizer's own variables smdebug saved: iteration count, hyperparameters."""

    def unscaled_gradient(self, optimizer: Any, grad: Any) -> Any:
        """A gradient as the optimizer will apply it, without a mixed-precision loss scale."""

    def unpack_data(self, data: Any) -> tuple[Any, Any, Any]:
        """A step's data as ``(x, y, sample_weight)``."""

    def is_variable(self, value: Any) -> bool:
        """Whether `value` is a variable of this Keras (or a TF variable)."""

    def is_rng_state(self, variable: Any) -> bool:
        """Whether `variable` is a random generator's state (Keras 3's ``SeedGenerator``, which
        ``model.variables`` lists for a Dropout layer), not a weight of the model."""


def _is_keras2(obj: Any) -> bool:
    if "tf_keras" not in sys.modules:
        return False
    return any(c.__module__.split(".", 1)[0] == "tf_keras" for c in type(obj).__mro__)


def flavor_of(obj: Any) -> KerasFlavor:
    """The adapter for the Keras that made `obj` (a model, layer or optimizer)."""
    if _is_keras2(obj):
        from smdebug_lite.tensorflow.keras2 import KERAS2

        return KERAS2
    from smdebug_lite.tensorflow.keras3 import KERAS3

    return KERAS3


__all__ = ["KerasFlavor", "flavor_of"]
