"""Scale benchmark: a long multi-worker trial opened compacted, uncompacted and by smdebug 1.0.34.

Generates a synthetic trial of STEPS x WORKERS x SCALARS (default 100,000 x 4 x 20) directly in
the file format (`smdebug_lite.format` helpers; each step's records are encoded once and shared
by the workers, which saved the same values), compacts it, and serves it from moto's S3 server
on 127.0.0.1 (filled through moto's backend in this process, not by 800k PUTs). Each
measurement runs in a fresh child process and reports wall seconds, S3 requests and peak RSS:

  open      create_trial(uri) + tensor_names()
  history   one tensor's values at every step (Tensor.values())

for smdebug-lite with the manifest, smdebug-lite reading per-step files (SMDEBUG_USE_MANIFEST=0)
and, on a smaller trial (--ref-steps, default 2,000; smdebug needs minutes per 10k index files
on moto), smdebug 1.0.34. Memory is compared at 10k vs STEPS steps (local, compacted).

    .venv/bin/python bench/bench_scale.py                      # full size (long)
    .venv/bin/python bench/bench_scale.py --steps 10000 --ref-steps 1000
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

import numpy as np

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import ratio, ref_python  # noqa: E402
from smdebug_lite.config import CollectionManager  # noqa: E402
from smdebug_lite.format.index_file import IndexDocument, TensorEntry  # noqa: E402
from smdebug_lite.format.locations import (  # noqa: E402
    END_OF_JOB_FILE,
    collections_file_name,
    event_file_name,
    index_file_name,
)
from smdebug_lite.format.tensor_codec import encode_tensor_record  # noqa: E402
from smdebug_lite.index.compact import compact_trial  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402

# One child per measurement, for either library (same API). Prints one JSON line.
CHILD = r"""
import json, resource, sys, time
module, uri, op = sys.argv[1], sys.argv[2], sys.argv[3]
create_trial = __import__(module + ".trials", fromlist=["create_trial"]).create_trial
t0 = time.perf_counter()
tr = create_trial(uri)
names = tr.tensor_names()
out = {"open_s": time.perf_counter() - t0, "tensors": len(names), "steps": len(tr.steps())}
storage = getattr(tr, "storage", None)
out["open_requests"] = getattr(storage, "requests", None)
if op == "history":
    t1 = time.perf_counter()
    vals = tr.tensor("scalar_00").values()
    out["history_s"] = time.perf_counter() - t1
    out["history_values"] = len(vals)
    if out["open_requests"] is not None:
        out["history_requests"] = storage.requests - out["open_requests"]
out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def make_trial(root: Path, steps: int, workers: int, scalars: int) -> float:
    """Write the trial; returns seconds taken."""
    started = time.perf_counter()
    names = [f"scalar_{i:02d}" for i in range(scalars)]
    for w in range(workers):
        path = root / collections_file_name(f"worker_{w}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CollectionManager(framework="pytorch", num_workers=workers).export())
    made: set[str] = set()
    for s in range(steps):
        mode, mode_step = (ModeKeys.EVAL, s // 10) if s % 10 == 9 else (ModeKeys.TRAIN, s)
        chunks: list = []
        entries = []
        offset = 0
        for k, name in enumerate(names):
            rec = encode_tensor_record(name, np.array(np.float32(np.sin(s * 0.001 + k))), s,
                                       mode.value, mode_step, 1.0e9 + s)
            chunks += rec.chunks
            entries.append(TensorEntry(name, offset, rec.length, rec.crc, rec.stored_dtype,
                                       rec.shape, rec.content_offset, rec.orig_dtype))
            offset += rec.length
        event = b"".join(bytes(c) for c in chunks)
        for w in range(workers):
            worker = f"worker_{w}"
            doc = IndexDocument(s, worker, mode, mode_step, event_file_name(s, worker), entries)
            for rel, data in ((event_file_name(s, worker), event),
                              (index_file_name(s, worker), doc.to_json().encode())):
                d = os.path.dirname(rel)
                if d not in made:
                    (root / d).mkdir(parents=True, exist_ok=True)
                    made.add(d)
                with open(root / rel, "wb") as f:
                    f.write(data)
    (root / END_OF_JOB_FILE).write_bytes(b"")
    return time.perf_counter() - started


def start_moto() -> tuple[object, str]:
    import socket

    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    os.environ.update({"AWS_ENDPOINT_URL": url, "AWS_ENDPOINT_URL_S3": url,
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"})
    return server, url


def fill_bucket(bucket: str, prefix: str, root: Path) -> float:
    """Objects put straight into moto's backend (this process runs the server)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    started = time.perf_counter()
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"] if "aws" in s3_backends[
        DEFAULT_ACCOUNT_ID] else s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    if bucket not in backend.buckets:
        backend.create_bucket(bucket, "us-east-1")
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            key = f"{prefix}/{os.path.relpath(p, root)}"
            with open(p, "rb") as fh:
                backend.put_object(bucket, key, fh.read())
    return time.perf_counter() - started


def child(python: str, module: str, uri: str, op: str, env: dict | None = None,
          timeout: int = 7200) -> dict | None:
    cwd = "/tmp" if module == "smdebug" else str(REPO)
    full_env = dict(os.environ, **(env or {}))
    full_env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", CHILD, module, uri, op], capture_output=True, text=True,
                          cwd=cwd, env=full_env, timeout=timeout)
    if proc.returncode != 0:
        print(f"[{module} {uri} failed]\n{proc.stderr[-1500:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def show(label: str, r: dict | None) -> None:
    if r is None:
        print(f"  {label:<44} failed")
        return
    req = "" if r.get("open_requests") is None else f"{r['open_requests']:>8} req"
    hist = ""
    if "history_s" in r:
        hreq = "" if r.get("history_requests") is None else f", {r['history_requests']} req"
        hist = f" | history {r['history_s']:.2f}s{hreq}"
    print(f"  {label:<44} open {r['open_s']:8.2f}s {req} | rss {r['maxrss_mb']:.0f} MB{hist}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--scalars", type=int, default=20)
    ap.add_argument("--ref-steps", type=int, default=2000)
    ap.add_argument("--memory-steps", type=int, default=10_000,
                    help="the smaller trial whose memory is compared with --steps")
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--no-uncompacted-s3", action="store_true",
                    help="skip the slow per-step S3 open at --steps (ratios then n/a)")
    args = ap.parse_args()
    ours = sys.executable
    work = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    server, url = start_moto()
    off = {"SMDEBUG_USE_MANIFEST": "0"}
    try:
        sizes = sorted({args.steps, args.memory_steps} | ({args.ref_steps} if not args.no_ref
                                                           else set()))
        results: dict = {}
        for steps in sizes:
            root = work / f"t{steps}"
            made = make_trial(root, steps, args.workers, args.scalars)
            c0 = time.perf_counter()
            res = compact_trial(str(root))
            compact_s = time.perf_counter() - c0
            filled = fill_bucket("bench", f"t{steps}", root)
            print(f"\n{steps} steps x {args.workers} workers x {args.scalars} scalars: made in "
                  f"{made:.1f}s; compacted in {compact_s:.1f}s ({res.chunks_written} chunks, "
                  f"{res.values_inlined} values inlined); into moto in {filled:.1f}s")
            s3 = f"s3://bench/t{steps}"
            r = results[steps] = {
                "local_compacted": child(ours, "smdebug_lite", str(root), "history"),
                "local_plain": child(ours, "smdebug_lite", str(root), "history", off),
                "s3_compacted": child(ours, "smdebug_lite", s3, "history"),
            }
            if steps != args.steps or not args.no_uncompacted_s3:
                r["s3_plain"] = child(ours, "smdebug_lite", s3, "history", off)
            if steps == args.ref_steps and not args.no_ref and ref_python()[0]:
                py = ref_python()[0]
                r["ref_local"] = child(py, "smdebug", str(root), "history")
                r["ref_s3"] = child(py, "smdebug", s3, "open")
            for k, v in r.items():
                show(k, v)
            shutil.rmtree(root, ignore_errors=True)
        print("\nRatios (higher is better for smdebug-lite compacted):")
        for steps, r in results.items():
            comp, plain = r.get("s3_compacted"), r.get("s3_plain")
            if comp and plain:
                print(f"  {steps} steps, S3 open: requests {plain['open_requests']} -> "
                      f"{comp['open_requests']} ({ratio(plain['open_requests'], comp['open_requests'])}"
                      f" fewer; target >= 50x), time {ratio(plain['open_s'], comp['open_s'])} "
                      f"faster (target >= 10x)")
            lc, lp = r.get("local_compacted"), r.get("local_plain")
            if lc and lp:
                print(f"  {steps} steps, local open: {ratio(lp['open_s'], lc['open_s'])} faster")
            rl, rs = r.get("ref_local"), r.get("ref_s3")
            if rl and lc:
                print(f"  {steps} steps vs smdebug 1.0.34, local: open "
                      f"{ratio(rl['open_s'], lc['open_s'])}, history "
                      f"{ratio(rl.get('history_s'), lc['history_s'])}")
            if rs and comp:
                print(f"  {steps} steps vs smdebug 1.0.34, S3 open: "
                      f"{ratio(rs['open_s'], comp['open_s'])}")
        small, big = results.get(args.memory_steps), results.get(args.steps)
        if small and big and small["local_compacted"] and big["local_compacted"]:
            a, b = small["local_compacted"]["maxrss_mb"], big["local_compacted"]["maxrss_mb"]
            print(f"  memory (local, compacted): {a:.0f} MB at {args.memory_steps} steps, "
                  f"{b:.0f} MB at {args.steps} steps")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
