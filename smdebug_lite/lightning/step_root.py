"""The module a Lightning run registers with the hook in place of the LightningModule.

Lightning calls ``training_step`` (not ``forward``) once per batch, and a ``training_step``
may call ``self(x)`` once, several times or never (``self.encoder(x)``). So forward passes of
the LightningModule cannot mark steps; the callback starts one per batch instead. It registers
a stand-in that holds the LightningModule's submodules and parameters (the same objects, so
gradient and module hooks land on them) under the LightningModule's class name (so tensors are
named ``<LitModuleClass>_<parameter path>`` as the PyTorch hook names them), and that Lightning
never calls: its forward pre-hook fires only when the callback starts a step with it.
"""

from __future__ import annotations

from torch import nn


def step_root(pl_module: nn.Module) -> nn.Module:
    """A never-called module with `pl_module`'s name, children and direct parameters."""
    cls = type(type(pl_module).__name__, (_StepRoot,), {"__module__": __name__})
    root = cls()
    for name, child in pl_module.named_children():
        root.add_module(name, child)
    for name, param in pl_module.named_parameters(recurse=False):
        root.register_parameter(name, param)
    return root


class _StepRoot(nn.Module):
    def forward(self, *args, **kwargs):  # pragma: no cover - never called
        raise RuntimeError("the debugger's stand-in for a LightningModule is not callable")


__all__ = ["step_root"]
