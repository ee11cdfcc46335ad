"""Trial and Tensor views that read through a rule's TensorCache.

A rule sees its trials through these views (``self.base_trial``, ``self.other_trials``), so
custom rules written against the plain Trial API (``trial.tensor(n).value(s)``,
``.reduction_value(...)``) also read each tensor at most once per step. Everything else is
delegated to the real object; ``isinstance`` checks still see the real class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.config.arguments import parse_mode
from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules.tensor_cache import TensorCache

GLOBAL = ModeKeys.GLOBAL


def unwrap(trial: Any) -> Any:
    """The real trial behind a view (or the argument itself)."""
    return object.__getattribute__(trial, "_trial") if isinstance(trial, TrialView) else trial


def _wrapped(view: _Delegating) -> Any:
    """The object behind any view, read past the view's forwarding of attribute reads."""
    return object.__getattribute__(view, object.__getattribute__(view, "_wrapped_attr"))


class _Delegating:
    """Forwards attribute reads and writes to the wrapped object."""

    _wrapped_attr = "_trial"

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, self._wrapped_attr), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, self._wrapped_attr), name, value)

    @property  # type: ignore[misc]
    def __class__(self):  # noqa: D401 - makes isinstance(view, RealClass) true
        return type(object.__getattribute__(self, self._wrapped_attr))

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, self._wrapped_attr))

    def __eq__(self, other: object) -> bool:
        mine = object.__getattribute__(self, self._wrapped_attr)
        if isinstance(other, _Delegating):
            other = _wrapped(other)
        return mine is other or mine == other

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, self._wrapped_attr))


class TrialView(_Delegating):
    """A Trial whose tensors are `TensorView`s sharing one cache."""

    _wrapped_attr = "_trial"

    def __init__(self, trial: Any, cache: TensorCache) -> None:
        object.__setattr__(self, "_trial", unwrap(trial))
        object.__setattr__(self, "_cache", cache)
        # One view per tensor, as the trial keeps one Tensor per name: a rule asks for every
        # tensor at every step.
        object.__setattr__(self, "_views", {})

    def tensor(self, tname: str) -> TensorView:
        trial = object.__getattribute__(self, "_trial")
        cache = object.__getattribute__(self, "_cache")
        tensor = cache.tensor(trial, tname)
        views = object.__getattribute__(self, "_views")
        view = views.get(tname)
        if view is None or object.__getattribute__(view, "_tensor") is not tensor:
            view = views[tname] = TensorView(tensor, tname, trial, cache)
        return view

    def tensors(self, *args: Any, **kwargs: Any) -> list[str]:
        """Alias of `tensor_names` used by smdebug's documentation examples."""
        trial = object.__getattribute__(self, "_trial")
        fn = getattr(trial, "tensors", None) or trial.tensor_names
        return fn(*args, **kwargs)


class TensorView(_Delegating):
    """A Tensor whose `value`/`reduction_value` go through the cache.

    `value` returns a fresh writable copy, as the plain Tensor does, so rule code that edits
    the array in place cannot corrupt the cached one.
    """

    _wrapped_attr = "_tensor"

    def __init__(self, tensor: Any, name: str, trial: Any, cache: TensorCache) -> None:
        object.__setattr__(self, "_tensor", tensor)
        object.__setattr__(self, "_parts", (name, trial, cache))

    def value(self, step_num: int, mode: Any = GLOBAL, worker: str | None = None) -> np.ndarray:
        name, trial, cache = object.__getattribute__(self, "_parts")
        if mode.__class__ is not ModeKeys:
            mode = parse_mode(mode)
        return np.array(cache.value(trial, name, step_num, mode, worker))

    def reduction_value(self, step_num: int, reduction_name: str, mode: Any = GLOBAL,
                        worker: str | None = None, abs: bool = False) -> float:
        name, trial, cache = object.__getattribute__(self, "_parts")
        if mode.__class__ is not ModeKeys:
            mode = parse_mode(mode)
        return cache.reduction(trial, name, step_num, reduction_name, abs, mode, worker)

    def values(self, mode: Any = GLOBAL, worker: str | None = None) -> dict[int, np.ndarray]:
        tensor = object.__getattribute__(self, "_tensor")
        return {s: self.value(s, mode, worker) for s in tensor.steps(mode=parse_mode(mode))}
