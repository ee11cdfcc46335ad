"""Reliability under load: a DDP job's hook saving to S3 through a flaky proxy loses no step.

Target: a hook saving 200 tensors per step from 4 DDP workers (gloo, CPU) for 2,000 steps to
S3 through a proxy injecting 5% 503 SlowDown and 1% connection resets loses no step and
finishes within 1.5x of the fault-free time. S3 is moto's server on 127.0.0.1 (in this
process); the job runs twice, once straight against moto and once through the fault proxy of
tests/faults (seeded). The trial is then read back with `create_trial`, directly from moto,
and every (step, worker) must hold all its tensors.

A reset cuts a PUT's response in the middle of its headers, after S3 has stored the object,
which is what a reset looks like to a writer.

    .venv/bin/python bench/bench_s3_faults.py [--quick] [--steps N] [--workers N] [--tensors N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET_RATIO = 1.5
REGION = "us-east-1"


def _load_fault_proxy() -> Any:
    """tests/faults/fault_proxy.py, loaded by path (tests/ is not a package on sys.path)."""
    path = REPO / "tests" / "faults" / "fault_proxy.py"
    spec = importlib.util.spec_from_file_location("_bench_fault_proxy", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the fault proxy from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _s3_env(url: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}


# -- one DDP rank -----------------------------------------------------------------------------

def worker_main(out_dir: str, steps: int, tensors: int) -> None:
    """One rank: `tensors // 2` Linear layers, so weights + biases are `tensors` per step."""
    import torch
    import torch.distributed as dist
    from torch import nn

    import smdebug_lite.pytorch as smd

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    hook = smd.Hook(out_dir, include_workers="all", save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases"])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    layers = [nn.Linear(4, 4) for _ in range(tensors // 2)]
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(100 + rank)
    t1 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 4, generator=g)).square().mean().backward()
        opt.step()
    t2 = time.perf_counter()
    hook.close()
    t3 = time.perf_counter()
    dist.barrier()
    dist.destroy_process_group()
    print("@@RANK " + json.dumps({"rank": rank, "disabled": bool(hook.disabled),
                                  "setup_s": t1 - t0, "train_s": t2 - t1, "close_s": t3 - t2}),
          flush=True)


# -- the job, fault-free or through the proxy -------------------------------------------------

def run_job(s3_url: str, out_dir: str, steps: int, workers: int, tensors: int,
            log_dir: Path) -> tuple[float, list[dict], list[str]]:
    """Start `workers` ranks torchrun-style and wait: (wall seconds, rank reports, problems)."""
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    procs, logs = [], []
    t = time.perf_counter()
    for rank in range(workers):
        env = dict(base, **_s3_env(s3_url), PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(workers),
                   LOCAL_RANK=str(rank), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        log = open(log_dir / f"rank{rank}.log", "w+")  # noqa: SIM115 - closed below
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", out_dir, str(steps), str(tensors)],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO))
    for p in procs:
        p.wait(timeout=3600)
    wall = time.perf_counter() - t
    reports, problems = [], []
    for rank, (p, log) in enumerate(zip(procs, logs, strict=True)):
        log.seek(0)
        text = log.read()
        log.close()
        lines = [ln for ln in text.splitlines() if ln.startswith("@@RANK ")]
        if p.returncode != 0 or not lines:
            problems.append(f"rank {rank} exited {p.returncode}: {text[-1500:]}")
            continue
        reports.append(json.loads(lines[-1][len("@@RANK "):]))
        noted = [ln for ln in text.splitlines()  # a retried upload is no problem; a given-up one is
                 if "ERROR" in ln or ("failed" in ln.lower() and "retrying" not in ln)]
        problems.extend(f"rank {rank}: {ln}" for ln in noted[:5])
    return wall, reports, problems


def check_trial(uri: str, steps: int, workers: int, tensors: int) -> tuple[list, float]:
    """Every (step, worker) that lacks any of its `tensors` tensors, and the read time."""
    from smdebug_lite.trials import create_trial

    t = time.perf_counter()
    trial = create_trial(uri)
    held: Counter[tuple[int, str]] = Counter()
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps(show_incomplete_steps=True):
            for w in tensor.workers(step):
                held[(step, w)] += 1
    wall = time.perf_counter() - t
    lost = [(s, f"worker_{w}", held[(s, f"worker_{w}")]) for s in range(steps)
            for w in range(workers) if held[(s, f"worker_{w}")] != tensors]
    return lost, wall


# -- main ---------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--tensors", type=int, default=200, help="per step and worker; even")
    ap.add_argument("--quick", action="store_true", help="200 steps")
    ap.add_argument("--slowdown", type=float, default=0.05)
    ap.add_argument("--reset", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.tensors < 2 or args.tensors % 2:
        ap.error(f"--tensors must be an even number >= 2 (weights + biases), got {args.tensors}")
    steps = 200 if args.quick else args.steps

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
    fp = _load_fault_proxy()
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    moto_url = f"http://127.0.0.1:{port}"
    os.environ.update(_s3_env(moto_url))  # the trial reader goes straight to moto
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=moto_url, region_name=REGION).create_bucket(Bucket=bucket)
    print(f"{steps} steps x {args.workers} workers x {args.tensors} tensors; "
          f"faults: {args.slowdown:.0%} 503 SlowDown, {args.reset:.0%} resets (seed {args.seed})")
    results: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-s3-faults-") as tmp:
            for label in ("fault-free", "faulty"):
                uri = f"s3://{bucket}/{label}"
                log_dir = Path(tmp) / label
                log_dir.mkdir()
                if label == "fault-free":
                    wall, reports, problems = run_job(moto_url, uri, steps, args.workers,
                                                      args.tensors, log_dir)
                    counts = None
                else:
                    with fp.FaultProxy(moto_url, seed=args.seed, slowdown=args.slowdown,
                                   reset=args.reset, lifetime_s=7200,
                                   max_requests=10_000_000) as proxy:
                        wall, reports, problems = run_job(proxy.url, uri, steps, args.workers,
                                                          args.tensors, log_dir)
                        counts = proxy.counts
                lost, read_s = check_trial(uri, steps, args.workers, args.tensors)
                results[label] = {"wall": wall, "lost": lost, "problems": problems}
                print(f"\n[{label}] job wall {wall:.1f} s; trial read {read_s:.1f} s; "
                      f"(step, worker) incomplete/missing: {len(lost)}")
                for r in sorted(reports, key=lambda r: r["rank"]):
                    print(f"  rank {r['rank']}: setup {r['setup_s']:.1f} s, train "
                          f"{r['train_s']:.1f} s, close {r['close_s']:.1f} s, "
                          f"disabled={r['disabled']}")
                if counts is not None:
                    print(f"  proxy: {counts.requests} requests {dict(counts.by_method)}, "
                          f"{counts.slowdowns} SlowDown, {counts.resets} resets")
                for line in problems[:10]:
                    print("  problem: " + line)
                for s, w, n in lost[:10]:
                    print(f"  lost: step {s} {w}: {n} of {args.tensors} tensors")
    finally:
        server.stop()
    ff, bad = results["fault-free"], results["faulty"]
    ratio = bad["wall"] / ff["wall"]
    lost = len(ff["lost"]) + len(bad["lost"])
    met = lost == 0 and not bad["problems"] and ratio <= TARGET_RATIO
    print(f"\nfault-free {ff['wall']:.1f} s, faulty {bad['wall']:.1f} s, ratio {ratio:.2f} "
          f"(target <= {TARGET_RATIO}); lost (step, worker): fault-free {len(ff['lost'])}, "
          f"faulty {len(bad['lost'])}; target met: {'yes' if met else 'NO'}")
    return 0 if met else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())
