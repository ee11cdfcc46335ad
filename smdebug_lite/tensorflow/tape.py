"""``hook.wrap_tape(tape)``: a GradientTape that starts a step on ``with`` and saves gradients.

The tape's class is swapped for a subclass, so ``isinstance(tape, tf.GradientTape)`` and every
tape method keep working; ``with`` looks ``__enter__`` up on the class, which is why an instance
attribute would not do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tensorflow as tf

if TYPE_CHECKING:
    from smdebug_lite.tensorflow.keras_hook import KerasHook

_classes: dict[type, type] = {}


def _hooked_class(base: type) -> type:
    cls = _classes.get(base)
    if cls is not None:
        return cls

    class HookedGradientTape(base):  # type: ignore[misc, valid-type]
        _smd_hook: KerasHook

        def __enter__(self):
            hook = self._smd_hook
            if not hook.disabled:
                with hook.failsafe("GradientTape.__enter__"):
                    hook._tape_step_begin()
            return super().__enter__()

        def gradient(self, target, sources, *args, **kwargs):
            grads = super().gradient(target, sources, *args, **kwargs)
            hook = self._smd_hook
            if not hook.disabled:
                with hook.failsafe("GradientTape.gradient"):
                    hook._tape_gradient(target, sources, grads)
            return grads

    HookedGradientTape.__name__ = f"Hooked{base.__name__}"
    HookedGradientTape.__qualname__ = HookedGradientTape.__name__
    _classes[base] = HookedGradientTape
    return HookedGradientTape


def hook_tape(tape: tf.GradientTape, hook: KerasHook) -> tf.GradientTape:
    if not isinstance(tape, tf.GradientTape):
        raise TypeError(f"wrap_tape expects a tf.GradientTape, got {type(tape).__name__}")
    tape._smd_hook = hook  # type: ignore[attr-defined]
    if not getattr(type(tape), "_smd_hooked", False):
        cls = _hooked_class(type(tape))
        cls._smd_hooked = True  # type: ignore[attr-defined]
        tape.__class__ = cls
    return tape


__all__ = ["hook_tape"]
