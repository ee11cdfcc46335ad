"""The PyTorch hook's cost, step by step: where in a save cycle the time goes.

    .venv/bin/python bench/bench_hook_steps.py [--steps 3000] [--interval 10] [--no-hook]

The MLP of bench_hook.py (256-256-256-10, batch 64, one torch thread) with the hook saving
weights+gradients+losses every `--interval` steps, and an identical plain twin, trained
alternately one step each in the same process. For each position in the save cycle (step 0
saves, step 1 hands it over, the rest save nothing) it prints the median extra time of the
hooked step over the twin's, and their sum as a share of the cycle. Medians per position keep
rare hiccups of a shared VM out without hiding the saving step's cost. `--no-hook` runs the
same with two plain models: what the method itself reads as overhead.

Stepping the two models alternately shares some of the hook's cost with the twin: the 1.6 MB
a saving step copies evicts the weights of whichever model runs next. The total therefore reads
lower than bench_hook.py's block-paired figure (about 1.5 points on the development VM); this
script is for seeing where in the cycle the time goes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--no-hook", action="store_true", help="A/A: two plain models")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
    import torch
    from torch import nn

    torch.set_num_threads(1)

    def make():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        return m, torch.optim.SGD(m.parameters(), lr=0.01), nn.CrossEntropyLoss()

    hooked, twin = make(), make()
    xs = [torch.randn(64, 256) for _ in range(8)]
    ys = [torch.randint(0, 10, (64,)) for _ in range(8)]
    out_dir = tempfile.mkdtemp(prefix="bench-hook-steps-")
    hook = None
    try:
        if not args.no_hook:
            import smdebug_lite.pytorch as smd

            hook = smd.Hook(out_dir=os.path.join(out_dir, "run"),
                            save_config=smd.SaveConfig(save_interval=args.interval),
                            include_collections=["weights", "gradients", "losses"])
            hook.register_module(hooked[0])
            hook.register_loss(hooked[2])
            hook.set_mode(smd.modes.TRAIN)

        def step(model, opt, loss_fn, i: int) -> None:
            opt.zero_grad()
            loss_fn(model(xs[i % 8]), ys[i % 8]).backward()
            opt.step()

        for i in range(args.warmup):
            step(*hooked, i)
            step(*twin, i)
        clock = time.perf_counter
        extra: list[list[float]] = [[] for _ in range(args.interval)]
        twin_times: list[float] = []
        # (the hook's step number is the loop index: both count every forward pass from 0)
        for i in range(args.warmup, args.warmup + args.steps):
            # The first of two steps in a row runs a little slower: which model goes first
            # alternates from one cycle to the next.
            hooked_first = (i // args.interval) % 2 == 0
            t0 = clock()
            step(*(hooked if hooked_first else twin), i)
            t1 = clock()
            step(*(twin if hooked_first else hooked), i)
            t2 = clock()
            ours, theirs = (t1 - t0, t2 - t1) if hooked_first else (t2 - t1, t1 - t0)
            extra[i % args.interval].append(ours - theirs)
            twin_times.append(theirs)
    finally:
        if hook is not None:
            hook.close()
        shutil.rmtree(out_dir, ignore_errors=True)

    step_ms = statistics.median(twin_times) * 1000
    print(f"twin: {step_ms:.3f} ms per step; extra time of the {'first plain model' if args.no_hook else 'hooked model'}"
          " per position in the cycle (median):")
    total = 0.0
    for pos, values in enumerate(extra):
        us = statistics.median(values) * 1e6
        total += us
        what = "saves" if pos == 0 else "hands the step over" if pos == 1 else "saves nothing"
        print(f"  step {pos} ({what}): {us:+8.1f} us")
    print(f"per cycle of {args.interval} steps: {total:+.0f} us = {total / 10 / (args.interval * step_ms):+.1f}% "
          "over the twin")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
