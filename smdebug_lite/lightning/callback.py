"""``smdebug_lite.lightning.DebuggerCallback``: the PyTorch hook driven by a Lightning Trainer.

Every batch is one step, in the mode of its loop: training batches TRAIN, validation and test
batches EVAL, prediction batches PREDICT (the sanity check's validation batches are no steps).
Weights and gradients are the PyTorch hook's; the callback adds what only Lightning knows: the
loss ``training_step`` returned (as ``loss_output_0``, in the ``losses`` collection), each
optimizer's learning rates (``scalar/lr/<group>``) and ``trainer.callback_metrics``
(``scalar/<name>``), saved at the steps the hook saves and at the end of each evaluation loop.
"""

from __future__ import annotations

from typing import Any

from smdebug_lite import callback_hook
from smdebug_lite.lightning.step_root import step_root
from smdebug_lite.modes import ModeKeys

try:
    from lightning.pytorch import Callback
except ImportError:  # (the older package name of the same project)
    from pytorch_lightning import Callback

LOSS_NAME = "loss"  # saved as loss_output_0: the `losses` collection's regex matches it


class DebuggerCallback(callback_hook.HookCallback, Callback):
    """Save a Lightning run's tensors as an smdebug trial.

    Takes the PyTorch hook's arguments. Without `out_dir` (or `hook`), the hook comes from
    SageMaker's DebugHookConfig JSON when there is one, as `smdebug_lite.pytorch.get_hook`
    builds it; with neither, the callback saves nothing."""

    owner = "lightning.DebuggerCallback"

    def _start(self) -> None:
        self._roots: dict[int, Any] = {}  # id(LightningModule) -> its registered stand-in
        self._root: Any = None  # the stand-in of the module being run

    # -- registration --------------------------------------------------------------------------

    def _attach(self, pl_module: Any) -> None:
        """Register the module being run (once per LightningModule; after `configure_model`)."""
        root = self._roots.get(id(pl_module))
        if root is None and self.hook is not None:
            root = self._roots[id(pl_module)] = step_root(pl_module)
            self.hook.register_module(root)
        self._root = root

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
        self._attach(pl_module)

    # -- steps -----------------------------------------------------------------------------------

    def _start_step(self, mode: ModeKeys) -> bool:
        """A batch of `mode` begins: one step. True when the hook saves it."""
        hook = self.hook
        if hook is None or self._root is None:
            return False
        hook.set_mode(mode)
        hook.forward_pre_hook(self._root, ())
        return hook.saving_this_step

    def _save_loss(self, outputs: Any) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if hasattr(loss, "detach") and loss.numel() == 1:
            self.hook.record_tensor_value(LOSS_NAME, loss.detach())

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None:
            self.hook.set_mode(ModeKeys.TRAIN)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._start_step(ModeKeys.TRAIN):
            # (read before the optimizer steps: the rate this batch's update uses)
            callback_hook.save_learning_rates(self.hook, trainer.optimizers)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        hook = self.hook
        if hook is not None and hook.saving_this_step:
            self._save_loss(outputs)
            callback_hook.save_metrics(hook, trainer.callback_metrics)

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None and not trainer.sanity_checking:
            self.hook.set_mode(ModeKeys.EVAL)

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self._start_step(ModeKeys.EVAL)

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self._eval_batch_end(outputs)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None and not trainer.sanity_checking:
            callback_hook.save_metrics(self.hook, trainer.callback_metrics)

    def on_test_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None:
            self.hook.set_mode(ModeKeys.EVAL)

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self._start_step(ModeKeys.EVAL)

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_batch_end(outputs)

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None:
            callback_hook.save_metrics(self.hook, trainer.callback_metrics)

    def on_predict_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if self.hook is not None:
            self.hook.set_mode(ModeKeys.PREDICT)

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self._start_step(ModeKeys.PREDICT)

    def _eval_batch_end(self, outputs: Any) -> None:
        hook = self.hook
        if hook is not None and hook.saving_this_step:
            self._save_loss(outputs)


__all__ = ["DebuggerCallback"]
