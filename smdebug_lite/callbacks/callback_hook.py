"""The PyTorch hook behind a training framework's callback (Lightning, the Hugging Face Trainer).

A callback takes the hook's constructor arguments, or reads SageMaker's DebugHookConfig JSON
like `smdebug_lite.pytorch.get_hook` does, so one training script runs with explicit settings
and as a SageMaker job. What the frameworks report beyond tensors (learning rates, logged
metrics) is saved as scalars in the same trial, only through the hook's public methods.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from smdebug_lite.exceptions import SMDebugTypeError
from smdebug_lite.hooks.arguments import hook_constructor
from smdebug_lite.log.logger import get_logger

logger = get_logger(__name__)

LR_PREFIX = "lr/"


def build_hook(
    owner: str,
    hook: Any,
    out_dir: str | None,
    **kwargs: Any,
) -> Any:
    """The hook a callback drives: the one given, one built from the arguments, else one from
    the DebugHookConfig JSON when there is one (None, logged, when there is not)."""
    from smdebug_lite.pytorch import Hook, del_hook, get_hook

    if hook is not None:
        if not isinstance(hook, Hook):
            raise SMDebugTypeError(
                f"{owner}: hook={type(hook).__name__} must be a smdebug_lite.pytorch.Hook")
        if out_dir is not None:
            raise SMDebugTypeError(f"{owner}: pass either hook= or out_dir=, not both")
        return hook
    if out_dir is not None:
        return Hook(out_dir=out_dir, **kwargs)
    current = get_hook()
    if current is not None and current.closed:  # (a finished run's hook: not this run's)
        del_hook()
    built = get_hook(create_if_not_exists=True)
    if built is None:
        logger.warning("%s: no out_dir given and no usable DebugHookConfig JSON "
                       "($SMDEBUG_CONFIG_FILE_PATH, else /opt/ml/input/config/debughookconfig.json; "
                       "or USE_SMDEBUG is off): it saves nothing in this run", owner)
    return built


def hook_from_json(json_file_path: str | None) -> Any:
    """`Hook.create_from_json_file`, for a callback's classmethod of the same name."""
    from smdebug_lite.pytorch import Hook

    return Hook.create_from_json_file(json_file_path)


def save_learning_rates(hook: Any, optimizers: Iterable[Any]) -> None:
    """Save each parameter group's learning rate as ``lr/<group>`` (``lr/<optimizer>.<group>``
    after the first optimizer), in the current step."""
    for i, opt in enumerate(optimizers):
        for g, group in enumerate(getattr(opt, "param_groups", ())):
            value = _as_float(group.get("lr"))
            if value is not None:
                hook.save_scalar(_lr_name(i, g), value)


def _lr_name(optimizer: int, group: int) -> str:
    if optimizer == 0 and group < len(_FIRST_LR_NAMES):
        return _FIRST_LR_NAMES[group]
    return f"{LR_PREFIX}{group}" if optimizer == 0 else f"{LR_PREFIX}{optimizer}.{group}"


_FIRST_LR_NAMES = tuple(f"{LR_PREFIX}{g}" for g in range(8))


def save_metrics(hook: Any, metrics: Mapping[str, Any] | None) -> None:
    """Save every number of a framework's metrics dict as ``scalar/<name>`` in the current
    step (strings and non-scalar tensors are skipped)."""
    if metrics:
        for name, value in metrics.items():
            number = _as_float(value)
            if number is not None:
                hook.save_scalar(name if name.__class__ is str else str(name), number)


def _as_float(value: Any) -> float | None:
    """A float for a Python/numpy number or a one-element tensor; None for anything else."""
    if value.__class__ is float:
        return value
    if isinstance(value, numbers.Number):
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    numel = getattr(value, "numel", None)
    if callable(numel) and numel() == 1:
        try:  # (a tensor on any device, of any float dtype; an array)
            return float(value.detach() if hasattr(value, "detach") else value)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


__all__ = ["LR_PREFIX", "build_hook", "hook_from_json", "save_learning_rates", "save_metrics"]


class HookCallback:
    """What both callbacks share: the PyTorch hook's arguments (or a `hook` to drive), the
    DebugHookConfig JSON route, and closing. A subclass sets `owner` (named in errors) and sets
    up its own state in `_start`."""

    owner = "DebuggerCallback"

    @hook_constructor(optional_out_dir=True)
    def __init__(self, shared: dict[str, Any], *, hook: Any = None) -> None:
        super().__init__()
        out_dir = shared.pop("out_dir")
        self.hook = build_hook(self.owner, hook, out_dir, **shared)
        self._start()

    def _start(self) -> None:
        """The callback's own state, once its hook is there."""

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> Any:
        """The callback SageMaker's DebugHookConfig JSON describes (`json_file_path`, else
        $SMDEBUG_CONFIG_FILE_PATH, else /opt/ml/input/config/debughookconfig.json)."""
        return cls(hook=hook_from_json(json_file_path))

    def close(self) -> None:
        """Write the last step and end the trial (also done at interpreter exit)."""
        if self.hook is not None:
            self.hook.close()
