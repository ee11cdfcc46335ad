"""Zero-code-change PyTorch: find the model and the losses of an unmodified script.

Global module hooks (``torch.nn.modules.module.register_module_forward_pre_hook``) see every
module call. The first top-level call of a module that has parameters is the model: it is
registered with the hook, and from then on each of its forward passes is a step, in TRAIN mode
when the model is in training mode and EVAL otherwise. Top-level calls of loss modules
(``torch.nn.modules.loss._Loss``) register them as losses. Once the model has run a whole step
the global hooks are removed, so the rest of training pays nothing for the discovery.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as module_mod

from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ModeKeys
from smdebug_lite.pytorch import get_hook
from smdebug_lite.pytorch.hook import Hook, in_backward_pass

logger = get_logger("container.attach_pytorch")


def _has_parameters(module: nn.Module) -> bool:
    return next(module.parameters(), None) is not None


class AutoRegister:
    """Discovers the model and loss modules as the script calls them."""

    def __init__(self, hook: Hook) -> None:
        self.hook = hook
        self.model: nn.Module | None = None
        self.losses: set[int] = set()
        self._depth = 0
        self._model_calls = 0
        self._global_handles: list[Any] = []
        self._mode_handle = None

    def install(self) -> None:
        self._global_handles = [
            module_mod.register_module_forward_pre_hook(self._before_call),
            module_mod.register_module_forward_hook(self._after_call, always_call=True),
        ]

    def _stop_discovery(self) -> None:
        for h in self._global_handles:
            h.remove()
        self._global_handles = []

    def _before_call(self, module: nn.Module, args: Any) -> None:
        self._depth += 1
        if self._depth != 1 or in_backward_pass():  # (a checkpointed part computed again)
            return
        try:
            if isinstance(module, nn.modules.loss._Loss):
                if id(module) not in self.losses:
                    self.losses.add(id(module))
                    self.hook.register_loss(module)
                    logger.info("smdebug-lite: saving losses of %s", module._get_name())
            elif self.model is None and _has_parameters(module):
                self.model = module
                self._mode_handle = module.register_forward_pre_hook(self._set_mode, prepend=True)
                self.hook.register_module(module)
                logger.info("smdebug-lite: registered model %s", module._get_name())
                # Hooks added during a call only run from the next call on: start this step here.
                self._set_mode(module, args)
                self.hook.forward_pre_hook(module, args)
        except Exception as e:
            self.hook.disable("zero-code-change registration", e)
            self._stop_discovery()

    def _after_call(self, module: nn.Module, args: Any, output: Any) -> None:
        self._depth = max(self._depth - 1, 0)

    def _set_mode(self, module: nn.Module, args: Any) -> None:
        if in_backward_pass():  # (the model checkpointed and computed again: not a step)
            return
        self._model_calls += 1
        if self._model_calls == 2:
            self._stop_discovery()  # one whole step seen: losses are known
        self.hook.set_mode(ModeKeys.TRAIN if module.training else ModeKeys.EVAL)

    def close(self) -> None:
        self._stop_discovery()
        if self._mode_handle is not None:
            self._mode_handle.remove()
            self._mode_handle = None
        self.hook.close()


def attach(config_path: str) -> Any:
    """Create the PyTorch hook from `config_path` and start discovering; returns its closer."""
    hook = get_hook(json_config_path=config_path, create_if_not_exists=True)
    if hook is None:
        return None
    auto = AutoRegister(hook)
    auto.install()
    logger.info("smdebug-lite attached to PyTorch %s; saving to %s", torch.__version__, hook.out_dir)
    return auto.close
