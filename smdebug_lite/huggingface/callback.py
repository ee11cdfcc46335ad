"""``smdebug_lite.huggingface.DebuggerCallback``: the PyTorch hook in a Hugging Face Trainer.

The Trainer calls its model once per micro-batch, in training and in evaluation, so each
forward pass of the model is one step. The Trainer has no event before an evaluation or
prediction loop starts, so the mode comes from the model's state at each forward pass: TRAIN
while it trains, EVAL otherwise (PREDICT inside ``callback.predicting()``). One forward
pre-hook of the callback does both: the model is registered with ``auto_step=False`` and the
pre-hook begins each step, in its mode, with `Hook.start_step`; at a saving step it also puts a
forward hook on the model for that one forward pass, which saves the loss. The pre-hook is run
as the hook runs its own (`smdebug_lite.pytorch.step_call`): without torch's general module
call path while it is the model's only hook. The callback adds what only the Trainer knows: the loss the model
returned (``loss_output_0``, in the ``losses`` collection), each parameter group's learning rate
for the optimizer step (``scalar/lr/<group>``), the ``logs`` of every ``on_log`` and the
metrics of ``trainer.predict`` (``scalar/<name>``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch import nn
from transformers import TrainerCallback

from smdebug_lite.callbacks import callback_hook
from smdebug_lite.modes import ModeKeys
from smdebug_lite.pytorch import step_call
from smdebug_lite.pytorch.torch_hooks import in_backward_pass

LOSS_NAME = "loss"  # saved as loss_output_0: the `losses` collection's regex matches it


class DebuggerCallback(callback_hook.HookCallback, TrainerCallback):
    """Save a Trainer run's tensors as an smdebug trial.

    Takes the PyTorch hook's arguments. Without `out_dir` (or `hook`), the hook comes from
    SageMaker's DebugHookConfig JSON when there is one, as `smdebug_lite.pytorch.get_hook`
    builds it; with neither, the callback saves nothing."""

    owner = "huggingface.DebuggerCallback"

    def _start(self) -> None:
        self._models: set[int] = set()
        self._eval_mode = ModeKeys.EVAL
        self._loss_hook: Any = None  # the handle of the loss's forward hook, at a saving step
        self._installed: list[tuple[nn.Module, Any, Any]] = []  # (model, pre-hook handle, step call)

    @contextlib.contextmanager
    def predicting(self) -> Iterator[None]:
        """Forward passes of an evaluating model are PREDICT steps inside this block
        (``with cb.predicting(): trainer.predict(ds)``); EVAL outside it."""
        previous, self._eval_mode = self._eval_mode, ModeKeys.PREDICT
        try:
            yield
        finally:
            self._eval_mode = previous

    # -- registration --------------------------------------------------------------------------

    def _attach(self, model: Any) -> None:
        if self.hook is None or not isinstance(model, nn.Module) or id(model) in self._models:
            return
        self._models.add(id(model))
        self.hook.register_module(model, auto_step=False)
        handle = model.register_forward_pre_hook(self._begin_step)
        self._installed.append((model, handle, step_call.install(model, handle.id, self._begin_step)))

    def _begin_step(self, module: nn.Module, inputs: Any) -> None:
        if in_backward_pass():  # (a checkpointed model computed again: not a step)
            return
        hook = self.hook
        hook.start_step(mode=ModeKeys.TRAIN if module.training else self._eval_mode)
        if hook.saving_this_step and self._loss_hook is None:
            self._loss_hook = module.register_forward_hook(self._save_loss)

    def _save_loss(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        handle, self._loss_hook = self._loss_hook, None
        if handle is not None:
            handle.remove()
        hook = self.hook
        if not hook.saving_this_step:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else getattr(outputs, "loss", None)
        if loss is not None and hasattr(loss, "detach") and loss.numel() == 1:
            hook.record_tensor_value(LOSS_NAME, loss.detach())

    def close(self) -> None:
        """Write the last step and end the trial; the model keeps no hook of the callback."""
        try:
            super().close()
        finally:
            for model, handle, call in self._installed:
                handle.remove()
                if call is not None:
                    step_call.uninstall(model, call)
            self._installed.clear()
            if self._loss_hook is not None:
                self._loss_hook.remove()
                self._loss_hook = None

    def on_init_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._attach(model)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._attach(model)

    # -- what the Trainer reports ------------------------------------------------------------------

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None,
                              **kwargs: Any) -> None:
        # (before the scheduler steps: the rate this optimizer step uses)
        hook = self.hook
        if hook is not None and optimizer is not None and hook.saving_this_step:
            callback_hook.save_learning_rates(hook, [optimizer])

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if self.hook is not None:
            callback_hook.save_metrics(self.hook, logs)

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        if self.hook is not None:
            callback_hook.save_metrics(self.hook, metrics)


__all__ = ["DebuggerCallback"]
