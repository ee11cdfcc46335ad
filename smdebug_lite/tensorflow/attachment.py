"""What the Keras hook changed on the user's objects, kept in one place so it can all be undone.

While Keras' loops run, the hook is attached to their model: the model's ``<kind>_function``
is a dispatcher, its ``<kind>_step`` records captured tensors, its layers' ``call`` and its
optimizer's gradient application report to the hook. When the loops end (or the hook is
disabled or closed) the model gets Keras' own functions back. Custom training loops register
models and optimizers (``register_model``, ``wrap_optimizer``): those stay patched across
loops, until the hook lets go of everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smdebug_lite.tensorflow import capture as cap
from smdebug_lite.tensorflow.flavor import flavor_of


class Attachment:
    """The model Keras' loops run on, the step functions installed on models, and the layers
    and optimizers patched, with what to keep patched when the loops end."""

    def __init__(self, session: cap.CaptureSession) -> None:
        self.model: Any = None  # the model of the Keras loops in progress, if any
        self._session = session
        self._functions: dict[tuple[int, str], cap.StepFunctions] = {}
        self._layers: list = []
        self._optimizers: list = []
        self._registered: list = []  # layers and optimizers of custom loops: patched until released

    def attach(self, model: Any) -> None:
        self.model = model

    def patch_layer(self, layer: Any, is_root: bool) -> None:
        """Route the layer's calls to the hook, remembered to be undone (once per layer)."""
        if cap.patch_layer(layer, self._session, is_root=is_root):
            self._layers.append(layer)

    def patch_optimizer(self, optimizer: Any, on_apply: Callable[..., None]) -> bool:
        """Route the optimizer's gradients to `on_apply`; False if it was already routed."""
        if flavor_of(optimizer).patch_optimizer(optimizer, on_apply):
            self._optimizers.append(optimizer)
            return True
        return False

    def register(self, obj: Any) -> None:
        """Keep `obj` (a layer or optimizer of a custom loop) patched when the loops end."""
        self._registered.append(obj)

    def install_step_dispatchers(self, model: Any) -> None:
        for kind in cap.KINDS:
            cap.install_step_dispatcher(model, kind, self._session)

    def install_function(self, model: Any, kind: str) -> cap.StepFunctions | None:
        """Put the kind's dispatcher where Keras looks for its step function; a function Keras
        made anew (first loop, recompiled model) gets a new one."""
        attr = f"{kind}_function"
        current = getattr(model, attr, None)
        if current is None:
            return None
        fns = self._functions.setdefault((id(model), kind), cap.StepFunctions())
        if current is not fns.dispatcher:
            if current is not fns.plain:
                fns.plain, fns.runner, fns.names, fns.failed = current, None, None, False
                fns.checked, fns.checked_ran, fns.checked_failed = None, False, False
            fns.dispatcher = cap.build_dispatcher(self._session, fns)
            setattr(model, attr, fns.dispatcher)
        return fns

    def detach(self) -> None:
        """Give the attached model Keras' own step functions back and undo every patch but
        those on registered objects."""
        model, self.model = self.model, None
        if model is not None:
            for (mid, kind), fns in self._functions.items():
                attr = f"{kind}_function"
                if mid == id(model) and getattr(model, attr, None) is fns.dispatcher:
                    setattr(model, attr, fns.plain)
            for kind in cap.KINDS:
                cap.remove_step_dispatcher(model, kind)
        keep = {id(m) for m in self._registered}
        for layer in self._layers:
            if id(layer) not in keep:
                cap.unpatch_layer(layer)
        self._layers = [ly for ly in self._layers if id(ly) in keep]
        for optimizer in self._optimizers:
            if id(optimizer) not in keep:
                flavor_of(optimizer).unpatch_optimizer(optimizer)
        self._optimizers = [o for o in self._optimizers if id(o) in keep]

    def release(self) -> None:
        """Undo everything, registered objects included (the hook is disabled or closed)."""
        self._registered = []
        self.detach()


__all__ = ["Attachment"]
