"""Microseconds per tensor written: smdebug-lite vs smdebug 1.0.34, measured in the same run.

Cases (issue 2): 1,000 steps x 50 small tensors, and 20 steps x 20 tensors of 4 MiB, the
latter also against raw `write()` of the same bytes (one file per step, like the event files).
Target: >= 5x faster than smdebug per small tensor; within 2x of raw write for large tensors.

    .venv/bin/python bench/bench_write.py [--small-steps N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ratio, run_reference  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter  # noqa: E402

MiB = 1 << 20

REFERENCE = r"""
import json, shutil, sys, tempfile, time, logging
import numpy as np
logging.disable(logging.CRITICAL)
from smdebug.core.writer import FileWriter
from smdebug.core.modes import ModeKeys

def run(steps, n, make):
    d = tempfile.mkdtemp(prefix="smd-bench-")
    arrays = [make(i) for i in range(n)]
    t = time.perf_counter()
    for step in range(steps):
        w = FileWriter(trial_dir=d, worker="worker_0", step=step, mode=ModeKeys.TRAIN)
        for i, a in enumerate(arrays):
            w.write_tensor(tdata=a, tname=f"layer{i}.weight", mode=ModeKeys.TRAIN, mode_step=step)
        w.close()
    dt = time.perf_counter() - t
    shutil.rmtree(d)
    return dt

small_steps, big_steps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
small = run(small_steps, 50, lambda i: rng.random(16).astype(np.float32))
big = run(big_steps, 20, lambda i: rng.random(1 << 20).astype(np.float32))
print(json.dumps({"small_s": small, "big_s": big}))
"""


def run_ours(steps: int, n: int, make) -> float:
    d = tempfile.mkdtemp(prefix="lite-bench-")
    arrays = [make(i) for i in range(n)]
    t = time.perf_counter()
    writer = TrialWriter(d)
    for step in range(steps):
        sw = writer.new_step(step, ModeKeys.TRAIN, step)
        for i, a in enumerate(arrays):
            sw.add_tensor(f"layer{i}.weight", a)
        writer.submit(sw)
    writer.close()
    dt = time.perf_counter() - t
    shutil.rmtree(d)
    return dt


def run_raw(steps: int, n: int, make) -> float:
    """The floor: the same bytes written with plain write(), one file per step."""
    d = tempfile.mkdtemp(prefix="raw-bench-")
    arrays = [make(i) for i in range(n)]
    t = time.perf_counter()
    for step in range(steps):
        sub = os.path.join(d, f"{step:012d}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "data.bin"), "wb") as f:
            for a in arrays:
                f.write(a.tobytes())
    dt = time.perf_counter() - t
    shutil.rmtree(d)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small-steps", type=int, default=1000)
    ap.add_argument("--big-steps", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    small_make = lambda i: rng.random(16).astype(np.float32)  # noqa: E731
    big_make = lambda i: rng.random(MiB).astype(np.float32)  # noqa: E731  (4 MiB)

    ours_small = min(run_ours(args.small_steps, 50, small_make) for _ in range(2))
    ours_big = min(run_ours(args.big_steps, 20, big_make) for _ in range(2))
    raw_big = min(run_raw(args.big_steps, 20, big_make) for _ in range(2))
    ref = run_reference(REFERENCE, str(args.small_steps), str(args.big_steps))

    n_small = args.small_steps * 50
    n_big = args.big_steps * 20
    us = lambda s, n: s / n * 1e6  # noqa: E731
    print(f"{'case':<38}{'smdebug 1.0.34':>16}{'smdebug-lite':>14}{'speedup':>10}")
    ref_small = us(ref["small_s"], n_small) if ref else None
    ref_big = us(ref["big_s"], n_big) if ref else None
    print(f"{f'{args.small_steps} steps x 50 small (us/tensor)':<38}"
          f"{ref_small if ref_small is None else round(ref_small, 1)!s:>16}"
          f"{us(ours_small, n_small):>14.1f}{ratio(ref_small, us(ours_small, n_small)):>10}")
    print(f"{f'{args.big_steps} steps x 20 x 4 MiB (us/tensor)':<38}"
          f"{ref_big if ref_big is None else round(ref_big, 1)!s:>16}"
          f"{us(ours_big, n_big):>14.1f}{ratio(ref_big, us(ours_big, n_big)):>10}")
    print(f"large tensors vs raw write(): raw {us(raw_big, n_big):.1f} us/tensor, "
          f"ours {us(ours_big, n_big):.1f} us/tensor = {ours_big / raw_big:.2f}x raw (target <= 2x)")
    print(f"small-tensor target >= 5x faster than smdebug: {ratio(ref_small, us(ours_small, n_small))}")


if __name__ == "__main__":
    main()
