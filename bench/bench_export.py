"""Export benchmark: a trial of N steps x 50 scalar tensors exported to Parquet (and CSV),
against reading the same values with the Trial API (`Tensor.values()` for every tensor).

Each measurement runs in a fresh process (no warm cache) and reports wall seconds and the
process's peak RSS; the best of --repeat runs is kept. Two trial sizes show how memory grows
with the number of steps: the export holds one window of steps at a time, so its peak RSS should
grow like the Trial API's own (the index), not with the table.

    .venv/bin/python bench/bench_export.py                  # 1000 and 5000 steps
    .venv/bin/python bench/bench_export.py --steps 5000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TENSORS = 50

CHILD = r"""
import json, resource, sys, time
op, trial_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
from smdebug_lite.trials import create_trial
trial = create_trial(trial_path)
if op == "api":
    n = sum(len(trial.tensor(name).values()) for name in trial.tensor_names())
else:
    from smdebug_lite.export import export_trial
    export_trial(trial, out, format=op, overwrite=True)
    n = None
wall = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps({"wall": wall, "rss_mb": rss, "values": n}))
"""


def build_trial(path: Path, steps: int) -> None:
    """N steps x 50 float32 scalars in TRAIN mode, written with smdebug_lite."""
    import numpy as np

    from smdebug_lite.config import CollectionManager
    from smdebug_lite.modes import ModeKeys
    from smdebug_lite.writer import ThreadTrialWriter

    stamp = path / ".bench_export"
    if stamp.exists() and stamp.read_text() == str(steps):
        return
    shutil.rmtree(path, ignore_errors=True)
    w = ThreadTrialWriter(str(path))
    w.write_collections(CollectionManager(framework="pytorch").export())
    names = [f"metric_{i:02d}" for i in range(TENSORS)]
    for s in range(steps):
        sw = w.new_step(s, ModeKeys.TRAIN, s)
        for i, name in enumerate(names):
            sw.add_tensor(name, np.array(i + s * 1e-3, dtype=np.float32))
        w.submit(sw)
    w.close()
    stamp.write_text(str(steps))


def measure(op: str, trial: Path, out: Path, repeat: int) -> dict:
    env = {**os.environ, "SMDEBUG_LOG_LEVEL": "warning", "PYTHONPATH": str(REPO)}
    best: dict | None = None
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", CHILD, op, str(trial), str(out)],
                              capture_output=True, text=True, env=env, timeout=3600)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            raise RuntimeError(f"{op} failed:\n{proc.stderr[-2000:]}")
        got = json.loads(line[len("RESULT "):])
        if best is None or got["wall"] < best["wall"]:
            best = got
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bench_export"))
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'steps':>6} {'operation':<28} {'wall s':>8} {'x API':>6} {'peak RSS MB':>12}")
    for steps in args.steps:
        trial = work / f"trial_{steps}"
        t0 = time.perf_counter()
        build_trial(trial, steps)
        built = time.perf_counter() - t0
        if built > 1:
            print(f"  (wrote {steps} x {TENSORS} trial in {built:.1f}s)")
        api = measure("api", trial, work / "unused", args.repeat)
        rows = [("Trial API: values() x 50", api)]
        rows.append(("export parquet", measure("parquet", trial, work / "out.parquet",
                                               args.repeat)))
        rows.append(("export csv", measure("csv", trial, work / "out.csv", args.repeat)))
        for label, r in rows:
            print(f"{steps:>6} {label:<28} {r['wall']:>8.2f} {r['wall'] / api['wall']:>6.1f} "
                  f"{r['rss_mb']:>12.0f}")


if __name__ == "__main__":
    main()
