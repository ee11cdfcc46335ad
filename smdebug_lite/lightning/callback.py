"""``smdebug_lite.lightning.DebuggerCallback``: the PyTorch hook driven by a Lightning Trainer.

Every batch is one step, in the mode of its loop: training batches TRAIN, validation and test
batches EVAL, prediction batches PREDICT (the sanity check's validation batches are no steps).
Lightning calls ``training_step`` (not ``forward``) once per batch, and a ``training_step`` may
call ``self(x)`` once, several times or never, so forward passes cannot mark steps: the
LightningModule is registered with ``auto_step=False`` and each batch start begins a step with
`Hook.start_step`. Weights and gradients are the PyTorch hook's; the callback adds what only
Lightning knows: the loss ``training_step`` returned (as ``loss_output_0``, in the ``losses``
collection), each optimizer's learning rates (``scalar/lr/<group>``) and
``trainer.callback_metrics`` (``scalar/<name>``), saved at the steps the hook saves and at the
end of each evaluation loop.

Lightning calls every hook of every callback at every batch, and skips one that is not
callable. So the batch-end hooks, needed only at saving steps, are set for a saving step and
set back to None after it; the per-batch hooks the callback has no use for are None; and a
callback without a hook has no hook at all. A step that saves nothing costs one call to
`start_step`, which counts it.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from smdebug_lite.callbacks import callback_hook
from smdebug_lite.modes import ModeKeys

try:
    from lightning.pytorch import Callback
except ImportError:  # (the older package name of the same project)
    from pytorch_lightning import Callback

LOSS_NAME = "loss"  # saved as loss_output_0: the `losses` collection's regex matches it
TRAIN, EVAL, PREDICT = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT

# Per-batch hooks Lightning would call for nothing.
_UNUSED = ("on_before_backward", "on_after_backward", "on_before_optimizer_step",
           "on_before_zero_grad", "on_predict_batch_end")
# Set only for a saving step (see the module docstring).
_SAVING_STEP_ONLY = ("on_train_batch_end", "on_validation_batch_end", "on_test_batch_end")
# Hooks Lightning calls without asking whether they are callable.
_CALLED_DIRECTLY = ("on_save_checkpoint", "on_load_checkpoint")
# The sanity check's validation batches are no steps.
_VALIDATION_BATCH = ("on_validation_batch_start", "on_validation_batch_end")


class DebuggerCallback(callback_hook.HookCallback, Callback):
    """Save a Lightning run's tensors as an smdebug trial.

    Takes the PyTorch hook's arguments. Without `out_dir` (or `hook`), the hook comes from
    SageMaker's DebugHookConfig JSON when there is one, as `smdebug_lite.pytorch.get_hook`
    builds it; with neither, the callback saves nothing."""

    owner = "lightning.DebuggerCallback"

    def _start(self) -> None:
        self._registered: set[int] = set()  # id() of the LightningModules registered
        if self.hook is None:  # nothing to save: Lightning calls none of the callback's hooks
            for name in dir(Callback):
                if name.startswith("on_") and name not in _CALLED_DIRECTLY:
                    setattr(self, name, None)
            return
        for name in _UNUSED + _SAVING_STEP_ONLY:
            setattr(self, name, None)

    # -- registration --------------------------------------------------------------------------

    def _attach(self, pl_module: Any) -> None:
        """Register the module being run (once per LightningModule; after `configure_model`)."""
        if id(pl_module) not in self._registered:
            self._registered.add(id(pl_module))
            self.hook.register_module(pl_module, auto_step=False)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)
        if trainer.sanity_checking:
            for name in _VALIDATION_BATCH:
                setattr(self, name, None)
        else:
            self.on_validation_batch_start = self._validation_batch_start

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    # -- steps -----------------------------------------------------------------------------------

    def _save_loss(self, outputs: Any) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, Tensor) and loss.numel() == 1:
            self.hook.record_tensor_value(LOSS_NAME, loss)  # (detached there, where needed)

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.hook.set_mode(TRAIN)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        hook = self.hook
        hook.start_step(mode=TRAIN)
        if hook.saving_this_step:
            # (read before the optimizer steps: the rate this batch's update uses)
            callback_hook.save_learning_rates(hook, trainer.optimizers)
            self.on_train_batch_end = self._train_batch_end

    def _train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                         batch_idx: int) -> None:
        self.on_train_batch_end = None
        if self.hook.saving_this_step:
            self._save_loss(outputs)
            callback_hook.save_metrics(self.hook, trainer.callback_metrics)

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self.hook.set_mode(EVAL)

    def _validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        hook = self.hook
        hook.start_step(mode=EVAL)
        if hook.saving_this_step:
            self.on_validation_batch_end = self._eval_batch_end

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            callback_hook.save_metrics(self.hook, trainer.callback_metrics)

    def on_test_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.hook.set_mode(EVAL)

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        hook = self.hook
        hook.start_step(mode=EVAL)
        if hook.saving_this_step:
            self.on_test_batch_end = self._eval_batch_end

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        callback_hook.save_metrics(self.hook, trainer.callback_metrics)

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.hook.set_mode(PREDICT)

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self.hook.start_step(mode=PREDICT)

    def _eval_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                        batch_idx: int, dataloader_idx: int = 0) -> None:
        self.on_validation_batch_end = self.on_test_batch_end = None
        if self.hook.saving_this_step:
            self._save_loss(outputs)


__all__ = ["DebuggerCallback"]
