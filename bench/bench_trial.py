"""Trial read benchmark: smdebug-lite against smdebug 1.0.34, on the same files, in one run.

Builds jobs of N steps x 50 tensors with smdebug_lite's TrialWriter (files smdebug reads too),
then times, in a fresh process per library:

  load      create_trial(path) + tensor_names()
  one       all values of one tensor across all steps (Tensor.values())
  step      one step of all tensors (Tensor.value(step) for every tensor)
  reduce    reduction_value(step, "mean") for every tensor and step
  all       every value of every tensor (Tensor.values() for every tensor)

Every measurement uses a fresh trial (no warm cache) and reports the best of several runs:
--repeat for smdebug-lite, --ref-repeat for smdebug's load / one tensor / one step (its
reduction and all-values passes take minutes, so they run once, sampled as below). Wall-clock and CPU seconds are both printed: on a shared
machine the CPU seconds are steadier (smdebug's wall time includes its 1 s sleep). Where smdebug would take longer than --budget seconds for an
operation, a sample of its calls is timed and the total extrapolated; the output says so.
Finally the number of S3 requests for a full load is measured against moto's S3 server.

    .venv/bin/python bench/bench_trial.py                 # 1000 and 5000 steps
    .venv/bin/python bench/bench_trial.py --steps 200 --budget 5 --no-s3
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

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

OPS = ("load", "one", "step", "reduce", "all")
LABELS = {
    "load": "create_trial + tensor_names()",
    "one": "all values of one tensor",
    "step": "one step of all tensors",
    "reduce": "reduction_value, every tensor x step",
    "all": "all values of all tensors",
}

# Runs in a child process, for either library (same API). Prints one JSON line.
CHILD = r"""
import gc, json, random, sys, time
MODULE, PATH, OPS, REPEAT, BUDGET = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), float(sys.argv[5])
SAMPLE = sys.argv[6] == "sample"  # the slow bulk operations: one sampled run instead of best-of
create_trial = __import__(MODULE + ".trials", fromlist=["create_trial"]).create_trial
wall, cpu = time.perf_counter, time.process_time
out = {}

def fresh():
    tr = create_trial(PATH)
    return tr, tr.tensor_names()

def collected():
    # Trials are reference cycles (a Tensor points back at its trial): the previous run's trial
    # is freed by the garbage collector, whenever it runs. Run it here, untimed, so that neither
    # library's measurement includes freeing an earlier trial.
    gc.collect()

def timed(fn, *args):
    w0, c0 = wall(), cpu()
    fn(*args)
    return wall() - w0, cpu() - c0

def best(fn, setup=lambda tr, names: ()):
    # A fresh trial per run; `setup` (untimed) picks the arguments, e.g. which step.
    runs = []
    for _ in range(REPEAT):
        collected()
        tr, names = fresh()
        args = setup(tr, names)
        collected()
        runs.append(timed(fn, tr, names, *args))
    return {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs), "sampled": None}

if "load" in OPS:
    runs = []
    for _ in range(REPEAT):
        collected()
        runs.append(timed(fresh))
    tr, names = fresh()
    out["load"] = {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs), "sampled": None}

def one(tr, names, n_steps):
    assert len(tr.tensor(names[len(names) // 2]).values()) == n_steps

def step(tr, names, s):
    for n in names:
        tr.tensor(n).value(s)

SETUP = {"one": lambda tr, names: (len(tr.steps()),),
         "step": lambda tr, names: (tr.steps()[len(tr.steps()) // 2],)}

def sampled(calls, total, fn):
    # Time calls in a random order until the budget is used; extrapolate to `total`.
    random.Random(0).shuffle(calls)
    w0, c0 = wall(), cpu(); done = 0
    for c in calls:
        fn(c); done += 1
        if wall() - w0 > BUDGET:
            break
    f = total / done
    return {"s": (wall() - w0) * f, "cpu": (cpu() - c0) * f,
            "sampled": None if done == total else [done, total]}

for op, fn in (("one", one), ("step", step)):
    if op in OPS:
        out[op] = best(fn, SETUP[op])

def reduce_all(tr, names):
    for n in names:
        t = tr.tensor(n)
        for s in t.steps():
            t.reduction_value(s, "mean")

if "reduce" in OPS:
    if not SAMPLE:
        out["reduce"] = best(reduce_all)
    else:
        collected()
        tr, names = fresh()
        calls = [(n, s) for n in names for s in tr.tensor(n).steps()]
        out["reduce"] = sampled(calls, len(calls), lambda c: tr.tensor(c[0]).reduction_value(c[1], "mean"))

if "all" in OPS:
    if not SAMPLE:
        out["all"] = best(lambda tr, names: [tr.tensor(n).values() for n in names])
    else:
        collected()
        tr, names = fresh()
        out["all"] = sampled(list(names), len(names), lambda n: tr.tensor(n).values())
print("RESULT " + json.dumps(out))
"""


# What the writer puts in a trial, numbered: a job written under another number is written
# again (2: one-element values in their index entries).
WRITER_LAYOUT = 2


def build_job(path: Path, steps: int, tensors: int) -> None:
    """A job like a small model's: mixed shapes, float32, TRAIN mode."""
    import numpy as np

    from smdebug_lite.config import CollectionManager
    from smdebug_lite.modes import ModeKeys
    from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

    stamp = path / ".bench_job"
    spec = f"{steps}x{tensors} layout {WRITER_LAYOUT}"
    if stamp.exists() and stamp.read_text() == spec:
        return
    shutil.rmtree(path, ignore_errors=True)
    shapes = [(64,), (16, 8), (), (4, 4, 4), (10,)]
    rng = np.random.default_rng(0)
    base = [rng.standard_normal(shapes[i % len(shapes)]).astype(np.float32) for i in range(tensors)]
    names = [f"layer{i // 2}.{'weight' if i % 2 else 'bias'}" for i in range(tensors)]
    t0 = time.perf_counter()
    w = TrialWriter(str(path))
    w.write_collections(CollectionManager(framework="pytorch").export())
    for s in range(steps):
        sw = w.new_step(s, ModeKeys.TRAIN, s)
        for name, b in zip(names, base, strict=True):
            sw.add_tensor(name, b + np.float32(s * 1e-3))
        w.submit(sw)
    w.close()
    stamp.write_text(spec)
    print(f"  wrote {steps} steps x {tensors} tensors to {path} in {time.perf_counter() - t0:.1f}s")


def run_child(python: str, module: str, job: Path, ops: list[str], repeat: int, budget: float,
              sample: bool = False, extra_env: dict[str, str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SMDEBUG_LOG_LEVEL"] = "warning"
    if module == "smdebug_lite":
        env["PYTHONPATH"] = str(REPO)
    env.update(extra_env or {})
    proc = subprocess.run([python, "-c", CHILD, module, str(job), ",".join(ops), str(repeat),
                           str(budget), "sample" if sample else "best"], capture_output=True, text=True, env=env, cwd="/tmp",
                          timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{module} benchmark failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def fmt(r: dict | None) -> str:
    if r is None:
        return "-"
    return f"{r['s']:.4f} ({r['cpu']:.4f})" + ("*" if r.get("sampled") else "")


def s3_requests(job: Path) -> None:
    """Requests and time for a full load (and a full read) of the job from S3 (moto)."""
    import socket

    from moto.server import ThreadedMotoServer

    from smdebug_lite.trials import create_trial

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    os.environ.update({"AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url,
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"})
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    try:
        import boto3
        from boto3.s3.transfer import TransferConfig

        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        t0 = time.perf_counter()
        files = [p for p in job.rglob("*") if p.is_file() and not p.name.startswith(".")]
        from concurrent.futures import ThreadPoolExecutor

        cfg = TransferConfig(use_threads=False)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: client.upload_file(str(p), "bench", f"job/{p.relative_to(job).as_posix()}",
                                                       Config=cfg), files))
        print(f"  uploaded {len(files)} files to s3://bench/job in {time.perf_counter() - t0:.1f}s")
        t0 = time.perf_counter()
        tr = create_trial("s3://bench/job")
        names = tr.tensor_names()
        load_s, load_req = time.perf_counter() - t0, tr.requests
        t0 = time.perf_counter()
        n = sum(len(tr.tensor(name).values()) for name in names)
        read_s, read_req = time.perf_counter() - t0, tr.requests - load_req
        steps = len(tr.steps())
        print(f"  S3 full load: {load_req} requests ({steps} index files; {load_s:.2f}s); "
              f"reading all {n} values: {read_req} more requests ({read_s:.2f}s)")
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--tensors", type=int, default=50)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "smdebug_lite_bench"))
    ap.add_argument("--repeat", type=int, default=7, help="runs per measurement for smdebug-lite")
    ap.add_argument("--ref-repeat", type=int, default=3,
                    help="runs per measurement for smdebug (load, one tensor, one step)")
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds smdebug may spend per operation before sampling kicks in")
    ap.add_argument("--no-smdebug", action="store_true")
    ap.add_argument("--no-s3", action="store_true")
    args = ap.parse_args()

    ref = None
    if not args.no_smdebug:
        from refvenv import ref_python

        ref, why = ref_python()
        if ref is None:
            print(f"smdebug reference venv unavailable ({why}); measuring smdebug-lite only")
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    for steps in args.steps:
        job = Path(args.workdir) / f"job_{steps}x{args.tensors}"
        print(f"\n== {steps} steps x {args.tensors} tensors ({steps * args.tensors} values) ==")
        build_job(job, steps, args.tensors)
        ours = run_child(sys.executable, "smdebug_lite", job, list(OPS), args.repeat, args.budget)
        theirs = (run_child(ref, "smdebug", job, list(OPS), args.ref_repeat, args.budget, sample=True)
                  if ref else {})
        print(f"  seconds: wall (cpu)  {'':18s} {'smdebug-lite':>19s} {'smdebug 1.0.34':>21s} "
              f"{'speedup wall (cpu)':>19s}")
        for op in OPS:
            a, b = ours.get(op), theirs.get(op)
            speed = f"{b['s'] / a['s']:7.1f}x ({b['cpu'] / a['cpu']:.1f}x)" if a and b else ""
            print(f"  {LABELS[op]:40s} {fmt(a):>19s} {fmt(b):>21s} {speed:>19s}")
        notes = [f"{LABELS[op]}: {b['sampled'][0]} of {b['sampled'][1]} calls timed, total extrapolated"
                 for op, b in theirs.items() if b.get("sampled")]
        if notes:
            print("  * smdebug sampled (bounded time): " + "; ".join(notes))
        if "all" in ours:
            verdict = "under" if ours["all"]["s"] < 1.0 else "OVER"
            print(f"  smdebug-lite reads all {steps * args.tensors} values in {ours['all']['s']:.3f}s "
                  f"wall, {ours['all']['cpu']:.3f}s cpu ({verdict} 1 s)")
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            print(f"  note: load average {load:.1f} on {os.cpu_count()} CPUs during this run: other "
                  "processes competed for the CPUs; cpu seconds are the steadier figure")
        if not args.no_s3:
            s3_requests(job)


if __name__ == "__main__":
    main()
