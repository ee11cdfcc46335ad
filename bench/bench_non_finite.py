"""What checking every step for NaN/Inf costs: `detect_non_finite=True` against its peers.

Two models on the CPU, a small MLP and one ``torch.nn.TransformerEncoderLayer``, each trained
(forward, loss, backward, SGD step) under four variants, interleaved round by round in one
process, each on its own copy of the same model:

* ``plain``: no hook;
* ``detect``: a Hook with ``detect_non_finite=True`` that saves nothing else (a save interval
  longer than the run);
* ``anomaly``: ``torch.autograd.set_detect_anomaly(True)`` (on only while its variant runs);
* ``minmax``: a forward hook on every module computing the abs max of each floating-point output
  and whether it is finite, as Hugging Face's ``DebugUnderflowOverflow`` does (written here);
* ``floor``: the least a check of every step's output and gradients can cost, written into the
  training loop itself: the model's output summed as it is made, each gradient summed as it is
  accumulated (a gradient hook per parameter), into slots of one tensor read once when the
  backward pass ends. No module outputs are kept, so it could say that a step went bad but not
  where: ``detect``'s distance to it is what telling where costs.

Every variant is warmed up first; then each round runs every variant for ``--steps`` steps,
in a new random order each round. Each variant trains ``--copies`` copies of the model, one per
round in turn: where a model's tensors lie in memory moves a step's time by about a percent,
the same way at every step, and taking turns averages that out. A round's time is the CPU time
of the process over its steps (``--clock cpu``, the default: on a shared machine, time other
processes take the core from the run is not counted; ``--clock wall`` for elapsed time), and a
variant's figure is the median of its rounds. The table shows ms/step, the overhead over
``plain`` and ``detect``'s added time over each peer's added time (below 1: ``detect`` adds
less), then the targets: at most 3% on the transformer block, 10% on the MLP, and at most a
fifth of each peer's added time.

    .venv/bin/python bench/bench_non_finite.py --steps 50 --rounds 36 --copies 3
"""

from __future__ import annotations

import argparse
import copy
import functools
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from smdebug_lite.pytorch import Hook  # noqa: E402

VARIANTS = ("plain", "detect", "anomaly", "minmax", "floor")
TARGETS = {"mlp": 0.10, "transformer": 0.03}  # detect's overhead, at most
PEER_SHARE = 0.2  # detect's added time over a peer's, at most


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


def floor_step_fn(model: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """`step_fn` with the least check of every output and gradient (see the docstring)."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    params = [p for p in model.parameters() if p.requires_grad]
    slots = torch.zeros(len(params) + 1)
    views = slots.unbind()
    queue_callback = torch.autograd.Variable._execution_engine.queue_callback
    queued = [False]

    def backward_ended() -> None:
        queued[0] = False
        if not math.isfinite(sum(slots.tolist())):
            raise FloatingPointError("non-finite")

    def summed(slot: torch.Tensor, param: torch.Tensor) -> None:
        torch.sum(param.grad, dim=None, dtype=torch.float32, out=slot)
        if not queued[0]:
            queued[0] = True
            queue_callback(backward_ended)

    for p, view in zip(params, views, strict=False):
        p.register_post_accumulate_grad_hook(functools.partial(summed, view))
    output_slot = views[-1]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        y = model(x)
        torch.sum(y.detach(), dim=None, dtype=torch.float32, out=output_slot)
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()

    return step


def run(name: str, build: Callable[[], tuple[nn.Module, torch.Tensor]], steps: int,
        rounds: int, copies: int, warmup: int, clock: Callable[[], float], out_root: str) -> bool:
    base, x = build()
    steppers: dict[str, list[Callable[[], None]]] = {v: [] for v in VARIANTS}
    hooks: list[Hook] = []
    for n in range(copies):
        for variant in VARIANTS:
            model = copy.deepcopy(base)
            if variant == "detect":
                hook = Hook(f"{out_root}/{name}-{n}", save_config={"save_interval": 10**9},
                            include_collections=[], detect_non_finite=True)
                hook.register_module(model)
                hooks.append(hook)
            elif variant == "minmax":
                minmax_hooks(model)
            make = floor_step_fn if variant == "floor" else step_fn
            steppers[variant].append(make(model, x))
    for variant in VARIANTS:
        with torch.autograd.set_detect_anomaly(variant == "anomaly"):
            for step in steppers[variant]:
                for _ in range(warmup):
                    step()
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        for variant in order:
            step = steppers[variant][r % copies]
            with torch.autograd.set_detect_anomaly(variant == "anomaly"):
                step()  # (this variant's model back in the caches)
                t0 = clock()
                for _ in range(steps):
                    step()
                times[variant].append((clock() - t0) / steps)
    for hook in hooks:
        hook.close()
    med = {v: statistics.median(t) for v, t in times.items()}
    plain = med["plain"]
    added = {v: med[v] - plain for v in VARIANTS}
    print(f"\n{name}: median of {rounds} rounds of {steps} steps, {copies} copies of the model")
    print(f"{'variant':<10}{'ms/step':>10}{'overhead':>10}{'detect added / its added':>28}")
    for v in VARIANTS:
        ratio = ""
        if v in ("anomaly", "minmax") and added[v] > 0:
            ratio = f"{added['detect'] / added[v]:.2f}"
        print(f"{v:<10}{med[v] * 1e3:>10.3f}{100 * added[v] / plain:>9.1f}%{ratio:>28}")
    print(f"  detect's distance to the floor: {100 * (added['detect'] - added['floor']) / plain:+.1f}"
          f" points ({(added['detect'] - added['floor']) * 1e6:+.0f} us a step)")
    checks = [(f"detect adds <= {100 * TARGETS[name]:.0f}%", added["detect"] <= TARGETS[name] * plain)]
    checks += [(f"detect adds <= {PEER_SHARE:.1f} x {peer}'s added time",
                added["detect"] <= PEER_SHARE * added[peer]) for peer in ("anomaly", "minmax")]
    for what, ok in checks:
        print(f"  {'met' if ok else 'MISSED'}: {what}")
    return all(ok for _, ok in checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per round and variant")
    parser.add_argument("--rounds", type=int, default=36, help="rounds (each variant once each)")
    parser.add_argument("--copies", type=int, default=3,
                        help="copies of the model per variant, one per round in turn")
    parser.add_argument("--warmup", type=int, default=20, help="steps per variant before timing")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="process CPU time (default) or elapsed time")
    parser.add_argument("--mlp-width", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    random.seed(0)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    with tempfile.TemporaryDirectory() as out_root:
        met = [run(name, build, args.steps, args.rounds, args.copies, args.warmup, clock,
                   out_root)
               for name, build in (("mlp", lambda: mlp(args.mlp_width)),
                                   ("transformer", lambda: transformer(args.d_model)))]
    print("\nall targets met" if all(met) else "\nsome targets missed")


if __name__ == "__main__":
    main()
