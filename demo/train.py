"""The demo's training script: a small classifier in plain PyTorch, with no smdebug code.

Under the zero-code-change launcher (``python -m smdebug_lite.container.train demo/train.py``) the
hook comes from the DebugHookConfig JSON without edits here. ``--manual-hook`` creates it in the
script instead (``Hook.create_from_json_file()``), for when the launcher is not available.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


def make_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three overlapping classes in 10 dimensions (fixed centres), so the loss falls steadily."""
    centers = torch.randn(3, 10, generator=torch.Generator().manual_seed(1234))
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=g)
    return centers[labels] + 0.7 * torch.randn(n, 10, generator=g), labels


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--eval-steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--manual-hook", action="store_true")
    args = p.parse_args(argv)

    torch.manual_seed(args.seed)
    x, y = make_data(args.batch_size * args.steps, args.seed)
    x_eval, y_eval = make_data(args.batch_size * args.eval_steps, args.seed + 1)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

    hook = None
    if args.manual_hook:
        from smdebug_lite import modes
        from smdebug_lite.pytorch import Hook

        hook = Hook.create_from_json_file()  # $SMDEBUG_CONFIG_FILE_PATH
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.set_mode(modes.TRAIN)

    model.train()
    for step in range(args.steps):
        batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
        opt.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"train step {step:3d}  loss {loss.item():.4f}", flush=True)

    model.eval()
    if hook is not None:
        hook.set_mode(modes.EVAL)
    correct = 0
    with torch.no_grad():
        for step in range(args.eval_steps):
            batch = slice(step * args.batch_size, (step + 1) * args.batch_size)
            out = model(x_eval[batch])
            loss_fn(out, y_eval[batch])
            correct += int((out.argmax(1) == y_eval[batch]).sum())
    print(f"eval accuracy {correct / len(y_eval):.3f}", flush=True)
    if hook is not None:
        hook.close()  # flushes and writes training_job_end.ts


if __name__ == "__main__":
    main()
