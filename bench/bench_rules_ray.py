"""Rules over a sweep: 20 trials, one rule each, on the local engine and on a local Ray cluster
of 2 CPUs, in the same run, with the same jobs and outcomes compared.

The trials are synthetic (the file format written directly by `bench_scale.make_trial`: STEPS
steps x 20 float32 scalars, one worker); one is written and copied, so every job reads its own
files. The rule is ExplodingTensor over every tensor: it finds nothing, so it reads every step.

  local       evaluate_jobs(engine="local"): one job after another in this process
  ray, start  run_jobs(num_cpus=2): a local cluster started for the batch and stopped after it
              (what `--engine ray` without an address costs)
  ray, warm   the batch on a running cluster whose workers a first batch started (as with
              `--ray-address`)

    .venv/bin/python bench/bench_rules_ray.py                  # 20 trials x 2,000 steps
    .venv/bin/python bench/bench_rules_ray.py --trials 8 --steps 500
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_scale import make_trial  # noqa: E402
from smdebug_lite.distributed import RuleJob, evaluate_jobs  # noqa: E402
from smdebug_lite.distributed.ray_engine import run_jobs  # noqa: E402

RULE = "ExplodingTensor"


def make_sweep(root: Path, trials: int, steps: int) -> list[str]:
    first = root / "run-00"
    make_trial(first, steps, 1, 20)
    paths = [str(first)]
    for i in range(1, trials):
        dest = root / f"run-{i:02d}"
        shutil.copytree(first, dest)
        paths.append(str(dest))
    return paths


def timed(jobs: list[RuleJob], engine: str) -> tuple[float, list]:
    t0 = time.perf_counter()
    outcomes = list(evaluate_jobs(jobs, engine=engine))
    return time.perf_counter() - t0, outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--cpus", type=int, default=2)
    args = ap.parse_args()
    import ray

    logging.getLogger("smdebug_lite").setLevel(logging.WARNING)
    # On tmpfs where there is one: writing and deleting 80k small files on a busy disk takes
    # minutes, and the rules read from the page cache either way.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="bench-rules-ray-", dir=shm) as tmp:
        t0 = time.perf_counter()
        trials = make_sweep(Path(tmp), args.trials, args.steps)
        print(f"{args.trials} trials x {args.steps} steps x 20 scalars written in "
              f"{time.perf_counter() - t0:.1f} s; rule {RULE}, one job per trial; "
              f"load average {os.getloadavg()[0]:.1f}")
        jobs = [RuleJob(t, RULE) for t in trials]

        local_s, local = timed(jobs, "local")
        # The engine starts a cluster of its own for the batch and stops it after.
        t0 = time.perf_counter()
        on_ray = list(run_jobs(jobs, num_cpus=args.cpus))
        cold_s = time.perf_counter() - t0
        # A running cluster: its workers started by a first batch, the second one timed.
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
        timed(jobs, "ray")
        warm_s, again = timed(jobs, "ray")
        ray.shutdown()
        report(args, local_s, cold_s, warm_s, local, on_ray, again)


def report(args: argparse.Namespace, local_s: float, cold_s: float, warm_s: float,
           local: list, on_ray: list, again: list) -> None:
    key = lambda o: (o.trial, o.rule)  # noqa: E731
    same = sorted(local, key=key) == sorted(on_ray, key=key) == sorted(again, key=key)
    statuses = sorted({o.status for o in local})
    print(f"outcomes identical on both engines: {same} (statuses: {', '.join(statuses)})")
    print(f"{'engine':<34}{'wall':>9}{'local / this':>14}")
    rows = [("local (this process)", local_s),
            (f"ray, {args.cpus} CPUs, start + batch", cold_s),
            (f"ray, {args.cpus} CPUs, running cluster", warm_s)]
    for label, s in rows:
        print(f"{label:<34}{s:>8.2f}s{local_s / s:>13.2f}x")
    if not same:
        raise SystemExit("the engines disagree")


if __name__ == "__main__":
    main()
