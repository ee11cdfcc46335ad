"""``hook.wrap_tape(tape)``: a GradientTape that starts a step on ``with`` and saves gradients.

The tape's class is swapped for a subclass, so ``isinstance(tape, tf.GradientTape)`` and every
tape method keep working; ``with`` looks ``__enter__`` up on the class, which is why an instance
attribute would not do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf


@dataclass(frozen=True)
class TapeCallbacks:
    """What a hooked tape calls: `on_enter()` when entered, `on_gradient(target, sources,
    grads)` after each ``tape.gradient`` (both keep their own errors from training)."""

    on_enter: Callable[[], None]
    on_gradient: Callable[[Any, Any, Any], None]


_classes: dict[type, type] = {}


def _hooked_class(base: type) -> type:
    cls = _classes.get(base)
    if cls is not None:
        return cls

    class HookedGradientTape(base):  # type: ignore[misc, valid-type]
        _smd_hook: TapeCallbacks

        def __enter__(self):
            self._smd_hook.on_enter()
            return super().__enter__()

        def gradient(self, target, sources, *args, **kwargs):
            grads = super().gradient(target, sources, *args, **kwargs)
            self._smd_hook.on_gradient(target, sources, grads)
            return grads

    HookedGradientTape.__name__ = f"Hooked{base.__name__}"
    HookedGradientTape.__qualname__ = HookedGradientTape.__name__
    _classes[base] = HookedGradientTape
    return HookedGradientTape


def hook_tape(tape: tf.GradientTape, callbacks: TapeCallbacks) -> tf.GradientTape:
    """`tape`, calling `callbacks` as it is entered and computes gradients."""
    if not isinstance(tape, tf.GradientTape):
        raise TypeError(f"wrap_tape expects a tf.GradientTape, got {type(tape).__name__}")
    tape._smd_hook = callbacks  # type: ignore[attr-defined]
    if not getattr(type(tape), "_smd_hooked", False):
        cls = _hooked_class(type(tape))
        cls._smd_hooked = True  # type: ignore[attr-defined]
        tape.__class__ = cls
    return tape


__all__ = ["TapeCallbacks", "hook_tape"]
