"""What checking every step for NaN/Inf costs: `detect_non_finite=True` against its peers.

Two models on the CPU, a small MLP and one ``torch.nn.TransformerEncoderLayer``, each trained
(forward, loss, backward, SGD step) under four variants, interleaved round by round in one
process, each on its own copy of the same model:

* ``plain``: no hook;
* ``detect``: a Hook with ``detect_non_finite=True`` that saves nothing else (a save interval
  longer than the run);
* ``anomaly``: ``torch.autograd.set_detect_anomaly(True)`` (on only while its variant runs);
* ``minmax``: a forward hook on every module computing the abs max of each floating-point output
  and whether it is finite, as Hugging Face's ``DebugUnderflowOverflow`` does (written here).

Each variant keeps its fastest round; the table shows ms/step, the overhead over ``plain`` and
``detect``'s added time over each peer's added time (below 1: ``detect`` adds less).

    .venv/bin/python bench/bench_non_finite.py --steps 50 --rounds 5
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from smdebug_lite.pytorch import Hook  # noqa: E402

VARIANTS = ("plain", "detect", "anomaly", "minmax")


def mlp(width: int) -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    return model, torch.randn(32, 64)


def transformer(d_model: int) -> tuple[nn.Module, torch.Tensor]:
    model = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=4 * d_model,
                                       batch_first=True, dropout=0.0)
    return model, torch.randn(4, 32, d_model)


def minmax_hooks(model: nn.Module) -> list:
    """abs max and isfinite of every module's floating-point outputs, per module, per step."""
    found: list[float] = []

    def check(module: nn.Module, args: object, output: object) -> None:
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for t in outs:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
                d = t.detach()
                found.append(float(d.abs().max()))
                if not bool(torch.isfinite(d).all()):
                    found.append(float("nan"))

    return [m.register_forward_hook(check) for m in model.modules()]


def step_fn(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    return step


def run(name: str, build: Callable[[], tuple[nn.Module, torch.Tensor]], steps: int,
        rounds: int, out_root: str) -> None:
    base, x = build()
    steppers: dict[str, Callable[[], None]] = {}
    hooks: list[Hook] = []
    for variant in VARIANTS:
        model = copy.deepcopy(base)
        if variant == "detect":
            hook = Hook(f"{out_root}/{name}", save_config={"save_interval": 10**9},
                        include_collections=[], detect_non_finite=True)
            hook.register_module(model)
            hooks.append(hook)
        elif variant == "minmax":
            minmax_hooks(model)
        steppers[variant] = step_fn(model, x)
    best = {v: float("inf") for v in VARIANTS}
    for _ in range(rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        for variant in order:
            step = steppers[variant]
            with torch.autograd.set_detect_anomaly(variant == "anomaly"):
                step()  # (warm)
                t0 = time.perf_counter()
                for _ in range(steps):
                    step()
                dt = (time.perf_counter() - t0) / steps
            best[variant] = min(best[variant], dt)
    for hook in hooks:
        hook.close()
    plain = best["plain"]
    added = {v: best[v] - plain for v in VARIANTS}
    print(f"\n{name}: fastest of {rounds} rounds of {steps} steps")
    print(f"{'variant':<10}{'ms/step':>10}{'overhead':>10}{'detect added / its added':>28}")
    for v in VARIANTS:
        ratio = ""
        if v not in ("plain", "detect") and added[v] > 0:
            ratio = f"{added['detect'] / added[v]:.2f}"
        print(f"{v:<10}{best[v] * 1e3:>10.3f}{100 * added[v] / plain:>9.1f}%{ratio:>28}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per round and variant")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (each variant once each)")
    parser.add_argument("--mlp-width", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    random.seed(0)
    with tempfile.TemporaryDirectory() as out_root:
        run("mlp", lambda: mlp(args.mlp_width), args.steps, args.rounds, out_root)
        run("transformer", lambda: transformer(args.d_model), args.steps, args.rounds, out_root)


if __name__ == "__main__":
    main()
