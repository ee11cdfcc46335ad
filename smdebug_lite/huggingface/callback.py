"""``smdebug_lite.huggingface.DebuggerCallback``: the PyTorch hook in a Hugging Face Trainer.

The Trainer calls its model once per micro-batch, in training and in evaluation, so the model
is registered with the hook as usual and each forward pass is one step. The Trainer has no
event before an evaluation or prediction loop starts, so the mode is set at each forward pass
from the model's state: TRAIN while it trains, EVAL otherwise (PREDICT inside
``callback.predicting()``). The callback adds what only the Trainer knows: the loss the model
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

from smdebug_lite import callback_hook
from smdebug_lite.modes import ModeKeys

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
        # (first, so that the mode is set before the hook's own pre-hook starts the step)
        model.register_forward_pre_hook(self._set_mode, prepend=True)
        self.hook.register_module(model)
        model.register_forward_hook(self._save_loss)

    def _set_mode(self, module: nn.Module, inputs: Any) -> None:
        self.hook.set_mode(ModeKeys.TRAIN if module.training else self._eval_mode)

    def _save_loss(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        hook = self.hook
        if not hook.saving_this_step:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else getattr(outputs, "loss", None)
        if loss is not None and hasattr(loss, "detach") and loss.numel() == 1:
            hook.record_tensor_value(LOSS_NAME, loss.detach())

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
