"""Scale benchmark: a long multi-worker trial opened compacted, uncompacted and by smdebug 1.0.34.

Generates a synthetic trial of STEPS x WORKERS x SCALARS (default 100,000 x 4 x 20) directly in
the file format (one step's files encoded by `smdebug_lite.format`'s helpers, then templated per
step and checked against the encoders at intervals; see `generate_steps`), compacts it, and
serves it from moto's S3 server on 127.0.0.1 (filled through moto's backend in this process,
not by 800k PUTs). Each measurement runs in a fresh child process and reports wall seconds, S3
requests, peak RSS (VmHWM) and the 1-minute load average when it started:

  open      create_trial(uri) + tensor_names()  (compacted: the chunks' columns only)
  history   one tensor's values at every step (Tensor.values(); compacted: the tensor's
            section of each chunk, one ranged GET per chunk on S3)

for smdebug-lite with the manifest, smdebug-lite reading per-step files (SMDEBUG_USE_MANIFEST=0)
and, on a smaller trial (--ref-steps), smdebug 1.0.34. The uncompacted S3 open makes one GET
per index file (400k at 100k steps: hours on moto), so by default it is measured at
--plain-s3-steps only and extrapolated to STEPS from them (printed as an extrapolation).
Memory is compared at --memory-steps vs STEPS (local, compacted and plain): the peak after
opening, and after the history too (which holds STEPS arrays itself).

    .venv/bin/python bench/bench_scale.py                    # 15 to 40 minutes on 2 busy CPUs
    .venv/bin/python bench/bench_scale.py --steps 10000 --plain-s3-steps 2000,5000 --ref-steps 500
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import ratio, ref_python  # noqa: E402
from smdebug_lite.config import CollectionManager  # noqa: E402
from smdebug_lite.format.crc import crc32c  # noqa: E402
from smdebug_lite.format.index_file import IndexDocument, TensorEntry  # noqa: E402
from smdebug_lite.format.locations import (  # noqa: E402
    COLLECTIONS_DIR,
    END_OF_JOB_FILE,
    EVENTS_DIR,
    INDEX_GROUP_SIZE,
    collections_file_name,
    event_file_name,
    index_file_name,
)
from smdebug_lite.format.records import FOOTER_SIZE, HEADER_SIZE  # noqa: E402
from smdebug_lite.format.tensor_codec import encode_tensor_record, varint  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402
from smdebug_lite.writer.compaction import compact_trial  # noqa: E402

# One child per measurement, for either library (same API). Prints one JSON line.
CHILD = r"""
import json, os, resource, sys, time
module, uri, op = sys.argv[1], sys.argv[2], sys.argv[3]
load = os.getloadavg()[0]
def hwm_mb():
    # VmHWM: this program's peak (ru_maxrss would start from the forking benchmark's size).
    try:
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
        return int(hwm) / 1024
    except (OSError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
create_trial = __import__(module + ".trials", fromlist=["create_trial"]).create_trial
t0 = time.perf_counter()
tr = create_trial(uri)
names = tr.tensor_names()
out = {"open_s": time.perf_counter() - t0, "tensors": len(names), "steps": len(tr.steps()),
       "load": load}
storage = getattr(tr, "storage", None)
out["open_requests"] = getattr(storage, "requests", None)
out["open_rss_mb"] = hwm_mb()
if op == "history":
    t1 = time.perf_counter()
    vals = tr.tensor("scalar_00").values()
    out["history_s"] = time.perf_counter() - t1
    out["history_values"] = len(vals)
    if out["open_requests"] is not None:
        out["history_requests"] = storage.requests - out["open_requests"]
out["maxrss_mb"] = hwm_mb()
print(json.dumps(out))
"""


# -- the synthetic trial ---------------------------------------------------------------------
#
# Every step of a worker has the same layout: SCALARS float32 records in one event file and an
# index document listing them. Within a "shape" of step (mode, byte length of the step's varint,
# digits of its mode step) records have the same lengths and offsets, so the event file is a
# template encoded once by `encode_tensor_record`, patched per step at known positions (wall
# time, step, value, mode step) and the index document a template filled with the step's
# numbers and CRCs. Both are compared with the real encoders' output for the first steps of
# every shape and at intervals, so the files are exactly what the writer would produce.

_WALL = struct.Struct("<d")
_VERIFY_EVERY = 4999


def tensor_names(scalars: int) -> list[str]:
    return [f"scalar_{i:02d}" for i in range(scalars)]


def scalar_values(steps: int, scalars: int) -> np.ndarray:
    """(steps, scalars) float32: the value of scalar k at step s (the same on every worker)."""
    s = np.arange(steps, dtype=np.float64)[:, None]
    return np.sin(s * 0.001 + np.arange(scalars, dtype=np.float64)[None, :]).astype(np.float32)


def mode_of(step: int) -> tuple[ModeKeys, int]:
    """Every 10th step (9, 19, ...) is an EVAL step; mode steps count each mode's own steps."""
    if step % 10 == 9:
        return ModeKeys.EVAL, step // 10
    return ModeKeys.TRAIN, step - step // 10


def wall_time(step: int) -> float:
    return 1.0e9 + step


def encode_step(names: list[str], values: np.ndarray, step: int, workers: list[str]
               ) -> tuple[bytes, list[TensorEntry], list[bytes]]:
    """One step encoded by the format helpers: (event file, entries, index file per worker)."""
    mode, mode_step = mode_of(step)
    chunks: list = []
    entries = []
    offset = 0
    for k, name in enumerate(names):
        rec = encode_tensor_record(name, values[k:k + 1].reshape(()), step, mode.value,
                                   mode_step, wall_time(step))
        chunks += rec.chunks
        entries.append(TensorEntry(name, offset, rec.length, rec.crc, rec.stored_dtype,
                                   rec.shape, rec.content_offset, rec.orig_dtype))
        offset += rec.length
    event = b"".join(bytes(c) for c in chunks)
    docs = [IndexDocument(step, w, mode, mode_step, event_file_name(step, w), entries)
            .to_json().encode() for w in workers]
    return event, entries, docs


class _StepTemplate:
    """The event file and index documents of one shape of step, with where each varies."""

    _STEP_SENTINEL = 987654321098  # twelve digits, like every step in a file name
    _MODE_STEP_SENTINEL = 876543219
    _CRC_SENTINEL = 765432198700

    def __init__(self, names: list[str], values: np.ndarray, step: int,
                 workers: list[str]) -> None:
        mode, mode_step = mode_of(step)
        event, entries, _ = encode_step(names, values, step, workers)
        self.event = bytearray(event)
        self.step_len = len(varint(step)) if step else 0
        self.digits = len(str(mode_step))
        self.wall_at: list[int] = []
        self.step_at: list[int] = []
        self.value_at: list[int] = []
        self.mode_step_at: list[int] = []
        self.payloads: list[tuple[int, int]] = []
        for e in entries:
            if e.shape != () or e.dtype != "<f4":
                raise AssertionError(f"{e.name}: expected a float32 scalar record, got {e}")
            start = e.start_idx + HEADER_SIZE
            self.payloads.append((start, e.start_idx + e.length - FOOTER_SIZE))
            self.wall_at.append(start + 1)
            self.step_at.append(start + 10)
            self.value_at.append(e.start_idx + e.content_offset)
            at = self.event.find(b"\x09mode_step\x12", start) + 11
            if self.event[at] != self.digits:
                raise AssertionError(f"mode step of {e.name} not found at byte {at}")
            self.mode_step_at.append(at + 1)
        # Index documents: the real one with sentinels, turned into a %-format.
        sentinel_entries = [TensorEntry(e.name, e.start_idx, e.length, self._CRC_SENTINEL + k,
                                        e.dtype, e.shape, e.content_offset, e.orig_dtype)
                            for k, e in enumerate(entries)]
        self.docs: list[str] = []
        for w in workers:
            text = IndexDocument(self._STEP_SENTINEL, w, mode, self._MODE_STEP_SENTINEL,
                                 event_file_name(self._STEP_SENTINEL, w),
                                 sentinel_entries).to_json().replace("%", "%%")
            text = text.replace(str(self._STEP_SENTINEL), "%(step)012d")
            text = text.replace(str(self._MODE_STEP_SENTINEL), "%(mode_step)d")
            for k in range(len(entries)):
                text = text.replace(str(self._CRC_SENTINEL + k), f"%(c{k})d")
            self.docs.append(text)

    def fill(self, step: int, values: np.ndarray) -> tuple[bytes, list[bytes]]:
        """(event file, index file per worker) of `step`, which must have this shape."""
        mode_step = mode_of(step)[1]
        buf = self.event
        wall = _WALL.pack(wall_time(step))
        step_bytes = varint(step)
        digits = str(mode_step).encode()
        raw = values.tobytes()
        fields: dict[str, int] = {"step": step, "mode_step": mode_step}
        view = memoryview(buf)
        for k, (a, b) in enumerate(self.payloads):
            w = self.wall_at[k]
            buf[w:w + 8] = wall
            if self.step_len:
                s = self.step_at[k]
                buf[s:s + self.step_len] = step_bytes
            v = self.value_at[k]
            buf[v:v + 4] = raw[4 * k:4 * k + 4]
            m = self.mode_step_at[k]
            buf[m:m + self.digits] = digits
            fields[f"c{k}"] = crc32c(view[a:b])
        view.release()
        return bytes(buf), [(d % fields).encode() for d in self.docs]


def _shape_of(step: int) -> tuple[int, int, int]:
    mode, mode_step = mode_of(step)
    return mode.value, len(varint(step)) if step else 0, len(str(mode_step))


def generate_steps(steps: range, workers: int, scalars: int, values: np.ndarray | None = None
                   ) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """(step, event file, index file per worker) for each step; every worker saved the same
    values, so one event file serves them all."""
    names = tensor_names(scalars)
    worker_names = [f"worker_{w}" for w in range(workers)]
    if values is None:
        values = scalar_values(steps.stop, scalars)
    templates: dict[tuple[int, int, int], _StepTemplate] = {}
    uses: dict[tuple[int, int, int], int] = {}
    for s in steps:
        shape = _shape_of(s)
        t = templates.get(shape)
        if t is None:
            t = templates[shape] = _StepTemplate(names, values[s], s, worker_names)
            uses[shape] = 0
        event, docs = t.fill(s, values[s])
        uses[shape] += 1
        if uses[shape] <= 2 or s % _VERIFY_EVERY == 0 or s == steps.stop - 1:
            real_event, _, real_docs = encode_step(names, values[s], s, worker_names)
            if event != real_event or docs != real_docs:
                raise AssertionError(f"step {s}: templated files differ from the encoders'")
        yield s, event, docs


def _write_steps(root: str, steps: range, workers: int, scalars: int, values: np.ndarray
                 ) -> int:
    """Generate and write `steps` (one process's share); returns files written."""
    worker_names = [f"worker_{w}" for w in range(workers)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    files = 0
    for s, event, docs in generate_steps(steps, workers, scalars, values):
        os.mkdir(os.path.join(root, os.path.dirname(event_file_name(s, "w"))))
        for w, doc in zip(worker_names, docs, strict=True):
            for rel, data in ((event_file_name(s, w), event), (index_file_name(s, w), doc)):
                fd = os.open(os.path.join(root, rel), flags, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                files += 1
    return files


def make_trial(root: Path, steps: int, workers: int, scalars: int,
               processes: int | None = None) -> float:
    """Write the trial under `root` (a new directory); returns seconds taken. Ranges of steps
    are generated and written by forked processes, one per CPU."""
    started = time.perf_counter()
    root_s = str(root)
    for d in (COLLECTIONS_DIR, EVENTS_DIR):
        os.makedirs(os.path.join(root_s, d), exist_ok=True)
    for g in range(0, max(steps, 1), INDEX_GROUP_SIZE):
        os.makedirs(os.path.join(root_s, os.path.dirname(index_file_name(g, "w"))),
                    exist_ok=True)

    def put(rel: str, data: bytes) -> None:
        with open(os.path.join(root_s, rel), "wb") as f:
            f.write(data)

    for w in range(workers):
        put(collections_file_name(f"worker_{w}"), _collections_json(workers))
    values = scalar_values(steps, scalars)
    processes = processes or os.cpu_count() or 1
    share = -(-steps // (4 * processes)) if steps else 1  # a few shares each: even finish
    shares = [range(a, min(a + share, steps)) for a in range(0, steps, share)]
    if processes == 1 or len(shares) <= 1:
        for r in shares:
            _write_steps(root_s, r, workers, scalars, values)
    else:
        # Forking copies no thread but the caller's: a lock another thread held at that moment
        # (a test run's S3 server, a trial's reader) stays held in the child forever.
        start = "fork" if threading.active_count() == 1 else "spawn"
        with mp.get_context(start).Pool(processes) as pool:
            pool.starmap(_write_steps, [(root_s, r, workers, scalars, values) for r in shares])
    put(END_OF_JOB_FILE, b"")  # last, as a finished job writes it
    return time.perf_counter() - started


def _collections_json(workers: int) -> bytes:
    return CollectionManager(framework="pytorch", num_workers=workers).export().encode()


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


def _backend():  # noqa: ANN202 - moto's S3 backend of this process (it runs the server)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    per_account = s3_backends[DEFAULT_ACCOUNT_ID]
    return per_account["aws"] if "aws" in per_account else per_account["global"]


def fill_bucket(bucket: str, prefix: str, root: Path) -> float:
    """Objects put straight into moto's backend: about 70 us each, a tenth of a PUT over HTTP."""
    backend = _backend()
    started = time.perf_counter()
    if bucket not in backend.buckets:
        backend.create_bucket(bucket, "us-east-1")
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                backend.put_object(bucket, f"{prefix}/{os.path.relpath(p, root)}", fh.read())
    return time.perf_counter() - started


def drop_bucket(bucket: str) -> None:
    backend = _backend()
    if bucket in backend.buckets:
        backend.buckets[bucket].keys.clear()
        backend.delete_bucket(bucket)


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
        print(f"  {label:<16} failed", flush=True)
        return
    req = "" if r.get("open_requests") is None else f"{r['open_requests']:>7} req"
    hist = ""
    if "history_s" in r:
        hreq = "" if r.get("history_requests") is None else f", {r['history_requests']} req"
        hist = f" | history {r['history_s']:.2f}s{hreq}"
    opened = f" ({r['open_rss_mb']:.0f} open)" if r.get("open_rss_mb") else ""
    print(f"  {label:<16} open {r['open_s']:8.2f}s {req:>11} | rss {r['maxrss_mb']:5.0f} MB{opened}"
          f"{hist} | load {r['load']:.1f}", flush=True)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


def default_work_dir() -> str:
    """tmpfs when there is room: 800k small files on a VM's disk take minutes of writeback."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and shutil.disk_usage(shm).free > 16 * 1024**3:
        return shm
    return tempfile.gettempdir()


def measure(steps: int, args: argparse.Namespace, work: Path) -> dict:
    ours = sys.executable
    off = {"SMDEBUG_USE_MANIFEST": "0"}
    root = work / f"t{steps}"
    made = make_trial(root, steps, args.workers, args.scalars)
    c0 = time.perf_counter()
    res = compact_trial(str(root))
    compact_s = time.perf_counter() - c0
    load = os.getloadavg()[0]
    print(f"\n{steps} steps x {args.workers} workers x {args.scalars} scalars: made in "
          f"{made:.1f}s; compacted in {compact_s:.1f}s ({res.chunks_written} chunks, "
          f"{res.values_inlined} values inlined); load {load:.1f}", flush=True)
    r: dict = {"made_s": made, "compact_s": compact_s}
    r["local_compacted"] = child(ours, "smdebug_lite", str(root), "history")
    show("local compacted", r["local_compacted"])
    r["local_plain"] = child(ours, "smdebug_lite", str(root), "history", off)
    show("local plain", r["local_plain"])
    ref = ref_python()[0] if steps == args.ref_steps and not args.no_ref else None
    if ref:
        r["ref_local"] = child(ref, "smdebug", str(root), "history")
        show("smdebug local", r["ref_local"])
    bucket = f"bench-scale-{steps}"
    filled = fill_bucket(bucket, "trial", root)
    print(f"  (into moto in {filled:.1f}s)", flush=True)
    shutil.rmtree(root, ignore_errors=True)
    s3 = f"s3://{bucket}/trial"
    try:
        r["s3_compacted"] = child(ours, "smdebug_lite", s3, "history")
        show("S3 compacted", r["s3_compacted"])
        if steps in args.plain_s3_steps:
            op = "history" if steps <= args.s3_history_max_steps else "open"
            r["s3_plain"] = child(ours, "smdebug_lite", s3, op, off)
            show("S3 plain", r["s3_plain"])
        if ref:
            r["ref_s3"] = child(ref, "smdebug", s3, "open")
            show("smdebug S3", r["ref_s3"])
    finally:
        drop_bucket(bucket)
    return r


def report(results: dict[int, dict], args: argparse.Namespace) -> None:
    big = results[args.steps]
    print("\nRatios:")
    plain_points = [(s, r["s3_plain"]) for s, r in sorted(results.items()) if r.get("s3_plain")]
    comp = big.get("s3_compacted")
    measured = big.get("s3_plain")
    if measured and comp:
        print(f"  {args.steps} steps, S3 open, measured: requests {measured['open_requests']} -> "
              f"{comp['open_requests']} ({ratio(measured['open_requests'], comp['open_requests'])}"
              f" fewer; target >= 50x), time {ratio(measured['open_s'], comp['open_s'])} less "
              "(target >= 10x)")
    elif comp and len(plain_points) >= 2:
        for s, p in plain_points:
            print(f"  uncompacted S3 open at {s} steps: {p['open_requests']} requests in "
                  f"{p['open_s']:.1f}s = {1000 * p['open_s'] / p['open_requests']:.2f} ms per "
                  f"request (load {p['load']:.1f})")
        a, b = linear_fit([s for s, _ in plain_points], [p["open_requests"] for _, p in
                                                         plain_points])
        c, d = linear_fit([p["open_requests"] for _, p in plain_points],
                          [p["open_s"] for _, p in plain_points])
        est_req = a * args.steps + b
        est_s = c * est_req + d
        print(f"  EXTRAPOLATED (not measured) uncompacted S3 open at {args.steps} steps: "
              f"{est_req:.0f} requests, {est_s:.0f}s (requests linear in steps; time linear in "
              "requests, fitted to the points above)")
        print(f"  {args.steps} steps, S3 open, compacted (measured) vs uncompacted "
              f"(extrapolated): requests {est_req:.0f} -> {comp['open_requests']} "
              f"({ratio(est_req, comp['open_requests'])} fewer; target >= 50x), time "
              f"{est_s:.0f}s -> {comp['open_s']:.1f}s ({ratio(est_s, comp['open_s'])} less; "
              "target >= 10x)")
    for s, r in sorted(results.items()):
        c, p = r.get("s3_compacted"), r.get("s3_plain")
        if s != args.steps and c and p:
            print(f"  {s} steps, S3 open, measured: requests {ratio(p['open_requests'], c['open_requests'])}"
                  f" fewer, time {ratio(p['open_s'], c['open_s'])} less")
        rl, rs, lc = r.get("ref_local"), r.get("ref_s3"), r.get("local_compacted")
        if rl and lc:
            print(f"  {s} steps vs smdebug 1.0.34, local: open {ratio(rl['open_s'], lc['open_s'])}"
                  f" less time, history {ratio(rl.get('history_s'), lc['history_s'])} less")
        if rs and c:
            print(f"  {s} steps vs smdebug 1.0.34, S3 open: {ratio(rs['open_s'], c['open_s'])} "
                  "less time")
    small = results.get(args.memory_steps)
    if small:
        for path in ("local_compacted", "local_plain"):
            a_, b_ = small.get(path), big.get(path)
            if a_ and b_:
                print(f"  peak RSS, {path.replace('_', ' ')}: {a_['maxrss_mb']:.0f} MB at "
                      f"{args.memory_steps} steps, {b_['maxrss_mb']:.0f} MB at {args.steps} steps"
                      f" ({ratio(b_['maxrss_mb'], a_['maxrss_mb'])}); after opening only: "
                      f"{a_['open_rss_mb']:.0f} and {b_['open_rss_mb']:.0f} MB "
                      f"({ratio(b_['open_rss_mb'], a_['open_rss_mb'])})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--scalars", type=int, default=20)
    ap.add_argument("--ref-steps", type=int, default=1000,
                    help="trial size smdebug 1.0.34 opens (minutes per 10k index files)")
    ap.add_argument("--memory-steps", type=int, default=10_000,
                    help="the smaller trial whose memory is compared with --steps")
    ap.add_argument("--plain-s3-steps", default="10000,20000",
                    help="sizes at which the uncompacted S3 open is measured (comma list; "
                         "include --steps to measure it there too)")
    ap.add_argument("--s3-history-max-steps", type=int, default=10_000,
                    help="largest size whose uncompacted S3 history is read (a GET per step)")
    ap.add_argument("--no-ref", action="store_true")
    ap.add_argument("--work-dir", default=default_work_dir())
    args = ap.parse_args()
    args.plain_s3_steps = {int(s) for s in args.plain_s3_steps.split(",") if s.strip()}
    work = Path(tempfile.mkdtemp(prefix="bench_scale_", dir=args.work_dir))
    server, _ = start_moto()
    print(f"trials under {work}; {os.cpu_count()} CPUs; load at start "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    try:
        sizes = {args.steps, args.memory_steps} | args.plain_s3_steps
        if not args.no_ref:
            sizes.add(args.ref_steps)
        results = {steps: measure(steps, args, work) for steps in sorted(sizes)}
        report(results, args)
        print("\nJSON " + json.dumps({str(k): v for k, v in results.items()}))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
