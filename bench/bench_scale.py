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
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _real_step(names: list[str], values: np.ndarray, step: int, workers: list[str]
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
        event, entries, _ = _real_step(names, values, step, workers)
        self.event = bytearray(event)
        self.step_len = len(_varint(step)) if step else 0
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
        step_bytes = _varint(step)
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
    return mode.value, len(_varint(step)) if step else 0, len(str(mode_step))


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
            real_event, _, real_docs = _real_step(names, values[s], s, worker_names)
            if event != real_event or docs != real_docs:
                raise AssertionError(f"step {s}: templated files differ from the encoders'")
        yield s, event, docs


def _write_files(root: str, batch: list[tuple[str, bytes]], dirs: list[str]) -> None:
    for d in dirs:
        os.mkdir(os.path.join(root, d))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for rel, data in batch:
        fd = os.open(os.path.join(root, rel), flags, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def write_meta_files(put: Callable[[str, bytes], object], workers: int) -> None:
    """Collections files of every worker and the end-of-job marker."""
    text = CollectionManager(framework="pytorch", num_workers=workers).export().encode()
    for w in range(workers):
        put(collections_file_name(f"worker_{w}"), text)
    put(END_OF_JOB_FILE, b"")


def make_trial(root: Path, steps: int, workers: int, scalars: int, threads: int = 4,
               batch_steps: int = 250) -> float:
    """Write the trial under `root` (a new directory); returns seconds taken. Files are
    written by a few threads (the system calls release the GIL) while steps are generated."""
    started = time.perf_counter()
    root_s = str(root)
    worker_names = [f"worker_{w}" for w in range(workers)]
    for d in (COLLECTIONS_DIR, EVENTS_DIR):
        os.makedirs(os.path.join(root_s, d), exist_ok=True)
    for g in range(0, max(steps, 1), INDEX_GROUP_SIZE):
        os.makedirs(os.path.join(root_s, os.path.dirname(index_file_name(g, "w"))),
                    exist_ok=True)

    def put(rel: str, data: bytes) -> None:
        with open(os.path.join(root_s, rel), "wb") as f:
            f.write(data)

    write_meta_files(put, workers)
    (root / END_OF_JOB_FILE).unlink()  # written last, as a finished job does
    pending: list[Future] = []
    batch: list[tuple[str, bytes]] = []
    dirs: list[str] = []
    with ThreadPoolExecutor(threads) as pool:
        for s, event, docs in generate_steps(range(steps), workers, scalars):
            dirs.append(os.path.dirname(event_file_name(s, "w")))
            for w, doc in zip(worker_names, docs, strict=True):
                batch.append((event_file_name(s, w), event))
                batch.append((index_file_name(s, w), doc))
            if len(dirs) >= batch_steps:
                pending.append(pool.submit(_write_files, root_s, batch, dirs))
                batch, dirs = [], []
                while len(pending) > 2 * threads:  # bounded: memory stays one window
                    pending.pop(0).result()
        pending.append(pool.submit(_write_files, root_s, batch, dirs))
        for f in pending:
            f.result()
    put(END_OF_JOB_FILE, b"")
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
