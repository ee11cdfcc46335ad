"""A small sweep written by real PyTorch training: one trial per learning rate, each saving
losses every step, and gradients raw plus their l2 norms (a norm per tensor per step is what a
sweep comparison reads)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

STEPS = 12
# lr 0 leaves the loss where it started: LossNotDecreasing is met there and nowhere else.
LEARNING_RATES = {"lr-0.1": 0.1, "lr-0.3": 0.3, "lr-0": 0.0}
STUCK_RUN = "lr-0"
LOSS_RULE_PARAMS = {"num_steps": "4", "diff_percent": "1", "noise_tolerance": "0"}


def train_run(out_dir: Path, lr: float, steps: int = STEPS, seed: int = 0) -> Path:
    """Full-batch training of a small classifier (the same batch every step, so the loss moves
    only when the weights do)."""
    import smdebug_lite as smd
    from smdebug_lite.pytorch import Hook

    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    hook = Hook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=1),
                include_collections=["gradients", "losses"])
    hook.get_collection("gradients").reduction_config = smd.ReductionConfig(
        norms=["l2"], save_raw_tensor=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.randn(64, 8)
    y = torch.randint(0, 3, (64,))
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    hook.close()
    return out_dir


def write_sweep(root: Path) -> dict[str, Path]:
    """`root/<run>/` for every learning rate; {run name: trial path}."""
    return {name: train_run(root / name, lr) for name, lr in LEARNING_RATES.items()}


def upload_tree(client, bucket: str, prefix: str, root: Path) -> str:
    """Every file under `root` put to `s3://bucket/prefix/...`; returns that URI."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(root).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}"
