"""A small PyTorch model trained with a hook saving its weights and losses: the run the
compaction tests write, in this process or in a child process (`python -c`)."""

from __future__ import annotations


def train(out: str, steps: int, save_interval: int = 1, close: bool = True):
    """Train for `steps` steps with a hook saving every `save_interval` steps; returns the
    hook (closed, and the global hook dropped, unless `close` is False)."""
    import torch
    from torch import nn

    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=save_interval),
                    include_collections=["weights", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(torch.randn(5, 4)), torch.randint(0, 2, (5,)))
        loss.backward()
        opt.step()
    if close:
        hook.close()
        smd.del_hook()
    return hook
