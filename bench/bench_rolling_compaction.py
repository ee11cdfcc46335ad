"""What compacting the index while training runs costs training, and what it gives a reader.

A PyTorch MLP of 12 Linear(16, 16) layers (48 tensors a step: weights, biases and their
gradients, plus the loss) is trained for --steps steps with a hook saving every step, in a fresh
process per run, at two batch sizes: 32, where the writer process is busy all the time (on a
2-CPU machine training and writing then take both CPUs), and 4096, where each step's compute
leaves the writer idle time, with rolling compaction on (the default) and off (SMDEBUG_COMPACT_ROLLING=0),
the two alternating for --rounds rounds. Per run it measures:

  loop    seconds of the training loop (what rolling compaction may slow down)
  close   seconds of hook.close() (the close-time compaction: the whole trial when rolling is
          off, only the tail after the last whole block when it is on)
  covered steps the manifest covers when the loop ends, before close: what a reader of the
          running (or killed) job opens from the manifest
  open    seconds to open the trial (create_trial + tensor_names) at that moment, in this
          process, and the number of index files it parsed

The fastest round of each setting counts (a shared VM's speed drifts between minutes).

    .venv/bin/python bench/bench_rolling_compaction.py [--steps 3000] [--rounds 3] [--batch 32 4096]
        [--interval 1]      # e.g. --steps 10000 --interval 10 --batch 4096: a usual save rate
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
import torch
from torch import nn
import smdebug_lite.pytorch as smd
from smdebug_lite.format import manifest as mf
from smdebug_lite.trials import create_trial

out, steps, batch, interval = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(12)])
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=interval),
                include_collections=["weights", "biases", "gradients", "losses"])
hook.register_module(model)
hook.register_loss(loss_fn)
x, y = torch.randn(batch, 16), torch.randn(batch, 16)
started = time.perf_counter()
for _ in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
loop = time.perf_counter() - started
head = os.path.join(out, mf.HEAD_KEY)
covered = mf.decode_head(open(head, "rb").read()).last_step + 1 if os.path.exists(head) else 0
started = time.perf_counter()
t = create_trial(out)
names = t.tensor_names()
opened = time.perf_counter() - started
parsed = t.index_files_read
started = time.perf_counter()
hook.close()
close = time.perf_counter() - started
print(json.dumps({"loop": loop, "close": close, "covered": covered, "open": opened,
                  "parsed": parsed, "tensors": len(names)}))
"""


def run(steps: int, batch: int, interval: int, rolling: bool, workdir: Path, n: int) -> dict:
    out = workdir / f"run{n}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMDEBUG_")}
    env.update(PYTHONPATH=str(REPO), SMDEBUG_LOG_LEVEL="warning",
               SMDEBUG_COMPACT_ROLLING="1" if rolling else "0")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(steps), str(batch), str(interval)], env=env,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(steps: int, batch: int, interval: int, rounds: int, workdir: Path) -> None:
    results: dict[bool, list[dict]] = {True: [], False: []}
    print(f"batch {batch}, save_interval {interval}:")
    for i in range(rounds):
        for rolling in (False, True):
            r = run(steps, batch, interval, rolling, workdir, 2 * i + rolling)
            results[rolling].append(r)
            print(f"  rolling {'on ' if rolling else 'off'}: loop {r['loop']:.2f}s, "
                  f"close {r['close']:.2f}s, covered {r['covered']}, open "
                  f"{r['open'] * 1000:.0f} ms ({r['parsed']} index files parsed)", flush=True)
    best = {k: {m: min(r[m] for r in v) for m in ("loop", "close", "open")}
            for k, v in results.items()}
    on, off = best[True], best[False]
    print(f"{steps} steps x {results[True][0]['tensors']} tensors, batch {batch}, saved every "
          f"{interval} steps, fastest of {rounds} rounds:")
    print(f"  {'':24}{'rolling off':>12}{'rolling on':>12}{'on/off':>8}")
    for m, label in (("loop", "training loop (s)"), ("close", "hook.close() (s)"),
                     ("open", "open before close (s)")):
        print(f"  {label:24}{off[m]:12.3f}{on[m]:12.3f}{on[m] / off[m]:8.2f}")
    covered = sorted(r["covered"] for r in results[True])
    print(f"  steps covered before close, rolling on: {covered} (off: 0)\n", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 4096],
                    help="batch sizes: 32 keeps the writer busy, 4096 leaves it idle time")
    ap.add_argument("--interval", type=int, default=1, help="save_interval of the hook")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="smdebug_lite_rolling_") as tmp:
        for batch in args.batch:
            measure(args.steps, batch, args.interval, args.rounds, Path(tmp) / f"b{batch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
