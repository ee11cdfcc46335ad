"""Trial reads on both kinds of trial, local and on S3, against smdebug 1.0.34 in one run.

Two trials of STEPS steps x TENSORS tensors (float32, mixed shapes, TRAIN mode):

  smdebug-written       written by real smdebug 1.0.34's FileWriter in the reference venv
                        (`smdebug_written_job.py`): per tensor its reductions (mean, max, l2)
                        and the raw tensor, as a hook with a ReductionConfig writes them
  smdebug-lite-written  written by smdebug-lite's TrialWriter (raw tensors only), as a trial
                        of ours is where no compaction has covered it yet: a running job's
                        steps after its last whole block of 1,000 (the chief's writer compacts
                        those while training runs, and the rest when its writing ends, also
                        when the training process was killed), a job killed together with
                        its writer process, or a run with compaction off

and each of them compacted (a copy with `manifest/`, see docs/scale.md): the smdebug-written one
with `compact_trial`, the smdebug-lite-written one with `compact_at_close`, what a hook calls at
close (it compacts a trial of at least SMDEBUG_COMPACT_MIN_FILES index files, default 100).
smdebug 1.0.34 never reads `manifest/`, so its timings for a compacted copy are those of the
trial it was copied from (--ref-on-compacted measures them again).

Each is read from its local directory and from s3:// (moto's server, started here on
127.0.0.1), by smdebug-lite and by smdebug 1.0.34, each in a fresh process
(`trial_ops_child.py`):

  load     create_trial(path) + tensor_names()
  one      one tensor's values over all steps (a 64-element tensor), with values()
  loop     the same tensor's values as a `value(step)` loop over its steps, in order
  scalar   one one-element tensor's values over all steps (inlined by the manifest)
  reduce   reduction_value(step, "mean") for every tensor and step
  all      every value of every tensor

(--ops picks some; all but `loop` by default.) moto answers in about a millisecond, where S3
makes every request wait tens of milliseconds for its first byte. --s3-latency-ms MS reads
from S3 as it behaves: both libraries go through `s3_latency_proxy.py`, which holds every
response until MS after the request arrived, in front of moto's server in a process of its own
(--s3-rate-cap adds S3's 5,500 GET/s per prefix); only S3 is read then, and the operations are
load, one and loop unless --ops says otherwise. Both libraries find the endpoint in
AWS_ENDPOINT_URL (smdebug 1.0.34 through boto3, which reads it itself).

smdebug-lite: best of --repeat runs, each on a fresh trial. smdebug: loading best of
--ref-repeat runs; the other operations are made of independent calls (smdebug's values() is
one value() per step), timed in a random order for at most --budget seconds on one fresh trial
and extrapolated (marked *). Each library's child runs --rounds times (default 3), the two
libraries alternating, and each operation's fastest round counts: the speed of a shared 2-vCPU
VM drifts by 30-60% between minutes (and between its vCPUs), which one pair of runs took as a
difference between the libraries. Targets: smdebug-lite at least 10x faster than smdebug on smdebug-written trials,
20x on its own compacted ones; with --s3-latency-ms, 100x on compacted trials. Our own trial
uncompacted has none: its reads are bound by one open (or one request) per file, and our hook
compacts every trial it leaves at rest. Wall-clock seconds decide; CPU seconds are printed
beside them.

    .venv/bin/python bench/bench_trial_smdebug_written.py            # about 40 minutes
    .venv/bin/python bench/bench_trial_smdebug_written.py --quick    # fewer runs, shorter samples
    .venv/bin/python bench/bench_trial_smdebug_written.py --no-s3    # local only, about 7 minutes
    .venv/bin/python bench/bench_trial_smdebug_written.py --s3-latency-ms 20   # S3 with latency
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "warning")
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(BENCH))

from bench_trial import build_job  # noqa: E402
from s3_latency_proxy import LatencyProxy, MotoProcess  # noqa: E402
from smdebug_written_job import build_smdebug_job  # noqa: E402

OPS = ("load", "one", "loop", "scalar", "reduce", "all")
DEFAULT_OPS = ("load", "one", "scalar", "reduce", "all")
LATENCY_OPS = ("load", "one", "loop")  # with --s3-latency-ms
LABELS = {
    "load": "create_trial + tensor_names",
    "one": "one tensor, all steps",
    "loop": "one tensor, value(s) loop",
    "scalar": "one scalar, all steps",
    "reduce": "reduction_value, all",
    "all": "all values, all tensors",
}
# kind -> (target speedup or None, the kind it is a compacted copy of). Our uncompacted trial
# has no target: one open or request per file bounds it (bench/RESULTS.md), and our hook
# compacts every trial it leaves at rest.
KINDS: dict[str, tuple[float | None, str | None]] = {
    "smdebug-written": (10.0, None),
    "smdebug-written compacted": (10.0, "smdebug-written"),
    "smdebug-lite-written": (None, None),
    "smdebug-lite-written compacted": (20.0, "smdebug-lite-written"),
}
LATENCY_COMPACTED_TARGET = 100.0  # compacted trials over S3 with --s3-latency-ms


def target_of(kind: str, latency: float | None) -> float | None:
    target, copied_from = KINDS[kind]
    if latency is not None and copied_from is not None:
        return LATENCY_COMPACTED_TARGET
    return target
CHILD = BENCH / "trial_ops_child.py"


# What compaction writes, numbered: a copy compacted under another number is compacted again
# (2: values an index entry carries are not repeated in its record's header line; 3: small
# values, up to 1 KiB, kept in the tensor sections).
COMPACTION_LAYOUT = 3


def compacted_copy(src: Path, dst: Path, at_close: bool) -> None:
    """`src` copied to `dst` and compacted there (kept while `src` is unchanged)."""
    import shutil

    from smdebug_lite.writer.compaction import compact_at_close, compact_trial

    stamp = dst / ".bench_job"
    spec = f"compacted {COMPACTION_LAYOUT} " + (src / ".bench_job").read_text()
    if stamp.exists() and stamp.read_text() == spec:
        return
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".bench_job", "manifest"))
    os.environ.pop("SMDEBUG_COMPACT", None)
    result = compact_at_close(str(dst)) if at_close else compact_trial(str(dst))
    if result is None or not result.chunks_written:
        raise RuntimeError(f"{dst} was not compacted: {result}")
    stamp.write_text(spec)
    print(f"  {'compact_at_close' if at_close else 'compact_trial'}: {result}")


class MotoS3:
    """moto's S3 server on 127.0.0.1, and the environment that points a client at it. With
    `latency_ms`, moto runs in its own process behind the latency proxy, which the environment
    names (uploads go to moto directly)."""

    def __init__(self, latency_ms: float | None = None, rate_cap: bool = False) -> None:
        self.proxy: LatencyProxy | None = None
        if latency_ms is None:
            from moto.server import ThreadedMotoServer

            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            self.server: ThreadedMotoServer | MotoProcess = ThreadedMotoServer(
                ip_address="127.0.0.1", port=port, verbose=False)
            self.server.start()
            url = reader_url = f"http://127.0.0.1:{port}"
        else:
            self.server = MotoProcess()
            url = self.server.url
            self.proxy = LatencyProxy(url, latency_ms / 1000, rate_cap).start()
            reader_url = self.proxy.url
        self.env = {"AWS_ENDPOINT_URL": reader_url, "AWS_ENDPOINT_URL_S3": reader_url,
                    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
        import boto3

        self.client = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                                   aws_access_key_id="testing", aws_secret_access_key="testing")
        self.client.create_bucket(Bucket="bench")

    def upload(self, local: Path, prefix: str) -> str:
        files = [p for p in local.rglob("*") if p.is_file() and not p.name.startswith(".")]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda p: self.client.put_object(
                Bucket="bench", Key=f"{prefix}/{p.relative_to(local).as_posix()}",
                Body=p.read_bytes()), files))
        print(f"  uploaded {len(files)} files to s3://bench/{prefix} in "
              f"{time.perf_counter() - t0:.1f}s")
        return f"s3://bench/{prefix}"

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.server.stop()


def run_child(python: str, module: str, path: str, ops: Sequence[str], repeat: int,
              budget: float, mode: str, env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SMDEBUG_LOG_LEVEL"] = "warning"
    if module == "smdebug_lite":
        env["PYTHONPATH"] = str(REPO)
    env.update(env_extra)
    proc = subprocess.run([python, str(CHILD), module, path, ",".join(ops), str(repeat),
                           str(budget), mode], capture_output=True, text=True, env=env,
                          cwd="/tmp", timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{module} on {path} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def fastest(runs: list[dict]) -> dict:
    """Per operation, the fastest of several child processes' results."""
    return {op: min((r[op] for r in runs), key=lambda v: v["s"]) for op in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--tensors", type=int, default=50)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "smdebug_lite_bench"))
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per operation, smdebug-lite, local")
    ap.add_argument("--s3-repeat", type=int, default=2,
                    help="runs per operation, smdebug-lite, S3 (each loads a fresh trial)")
    ap.add_argument("--ref-repeat", type=int, default=2, help="loads timed for smdebug")
    ap.add_argument("--budget", type=float, default=4.0,
                    help="seconds of smdebug calls timed per sampled operation")
    ap.add_argument("--quick", action="store_true",
                    help="fewer runs and a smaller sampling budget")
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--s3-latency-ms", type=float,
                    help="read from S3 only, through a proxy holding every response this long "
                         "(S3's first-byte latency, e.g. 20)")
    ap.add_argument("--s3-rate-cap", action="store_true",
                    help="with --s3-latency-ms: S3's 5,500 GET/s per prefix (503 SlowDown)")
    ap.add_argument("--ops", help=f"comma-separated, some of {', '.join(OPS)} (default: "
                                  f"{','.join(DEFAULT_OPS)}; with --s3-latency-ms "
                                  f"{','.join(LATENCY_OPS)})")
    ap.add_argument("--ref-on-compacted", action="store_true",
                    help="time smdebug on the compacted copies too (it ignores manifest/)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="child processes per library, trial and place, alternating between "
                         "the libraries; each operation's fastest counts")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated trial kinds to measure (default: all four)")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.s3_repeat, args.ref_repeat, args.budget = 2, 1, 1, 1.5
        args.rounds = 1

    from refvenv import ref_python

    ref, why = ref_python()
    if ref is None:
        sys.exit(f"the smdebug 1.0.34 reference venv is needed: {why}")
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; "
          f"{args.steps} steps x {args.tensors} tensors; load average "
          f"{os.getloadavg()[0]:.1f}")
    work = Path(args.workdir)
    size = f"{args.steps}x{args.tensors}"
    jobs = {"smdebug-written": work / f"smdw_{size}",
            "smdebug-written compacted": work / f"smdw_{size}_compacted",
            "smdebug-lite-written": work / f"job_{size}",
            "smdebug-lite-written compacted": work / f"job_{size}_compacted"}
    build_smdebug_job(ref, jobs["smdebug-written"], args.steps, args.tensors)
    build_job(jobs["smdebug-lite-written"], args.steps, args.tensors)
    compacted_copy(jobs["smdebug-written"], jobs["smdebug-written compacted"], at_close=False)
    compacted_copy(jobs["smdebug-lite-written"], jobs["smdebug-lite-written compacted"],
                   at_close=True)
    wanted = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in wanted if k not in KINDS]
    if unknown:
        sys.exit(f"--kinds: unknown {unknown}; expected some of {list(KINDS)}")
    latency = args.s3_latency_ms
    if latency is not None and args.no_s3:
        sys.exit("--s3-latency-ms reads from S3; leave out --no-s3")
    ops = [o.strip() for o in (args.ops or ",".join(
        DEFAULT_OPS if latency is None else LATENCY_OPS)).split(",") if o.strip()]
    if not ops or set(ops) - set(OPS):
        sys.exit(f"--ops: expected some of {list(OPS)}, got {ops}")

    s3 = None if args.no_s3 else MotoS3(latency, args.s3_rate_cap)
    s3_where = "s3" if latency is None else f"s3+{latency:g}ms"
    rows = []
    theirs_of: dict[tuple[str, str], dict] = {}
    try:
        for kind in wanted:
            job = jobs[kind]
            places = [("local", str(job), {})] if latency is None else []
            if s3 is not None:
                places.append((s3_where, s3.upload(job, job.name), s3.env))
            for where, path, env in places:
                t0 = time.perf_counter()
                repeat = args.repeat if where == "local" else args.s3_repeat
                copied_from = KINDS[kind][1]
                theirs = theirs_of.get((copied_from, where)) if copied_from else None
                measure_theirs = theirs is None or args.ref_on_compacted
                rounds = max(1, args.rounds)
                ours_runs, theirs_runs = [], []
                for _ in range(rounds):  # alternating: a slow spell of the VM hits both
                    ours_runs.append(run_child(sys.executable, "smdebug_lite", path, ops,
                                               repeat, args.budget, "best", env))
                    if measure_theirs:
                        theirs_runs.append(run_child(ref, "smdebug", path, ops,
                                                     args.ref_repeat, args.budget, "sample", env))
                ours = fastest(ours_runs)
                if measure_theirs:
                    theirs = theirs_of[(kind, where)] = fastest(theirs_runs)
                else:
                    theirs = {op: {**v, "reused": True} for op, v in theirs.items()}
                print(f"  {kind} / {where}: measured in {time.perf_counter() - t0:.0f}s")
                rows += [(kind, where, op, ours[op], theirs[op]) for op in ops]
    finally:
        if s3 is not None:
            s3.stop()
    if s3 is not None and s3.proxy is not None:
        st = s3.proxy.stats
        print(f"latency proxy ({latency:g} ms{', rate cap' if args.s3_rate_cap else ''}): "
              f"{st.requests} requests, at most {st.in_flight_max} at once, "
              f"{st.slowdowns} refused with SlowDown, {st.connections} connections")

    print(f"\nseconds, wall (cpu); * = smdebug sampled for {args.budget:g}s and extrapolated; "
          "= = smdebug's time on the same trial before compaction; reads: smdebug-lite's event "
          "file reads (r) and S3 requests (q) in that operation")
    print(f"{'trial':31s} {'where':9s} {'operation':28s} {'smdebug-lite':>17s} "
          f"{'smdebug 1.0.34':>19s} {'speedup':>8s} {'target':>6s}  met  {'reads':>11s}")
    missed = []
    for kind, where, op, a, b in rows:
        speed = b["s"] / a["s"]
        target = target_of(kind, latency)
        met = target is None or speed >= target
        if not met:
            missed.append(f"{kind}/{where}/{op} {speed:.1f}x")
        star = "=" if b.get("reused") else "*" if b.get("sampled") else " "
        reads = "" if a.get("reads") is None else f"{a['reads']}r"
        if a.get("requests") is not None:
            reads += f" {a['requests']}q"
        print(f"{kind:31s} {where:9s} {LABELS[op]:28s} {a['s']:8.4f} ({a['cpu']:6.3f}) "
              f"{b['s']:9.3f}{star}({b['cpu']:7.3f}) {speed:7.1f}x "
              f"{'-' if target is None else f'{target:.0f}x':>6s}  "
              f"{'-  ' if target is None else 'yes' if met else 'NO ':3s}  {reads:>11s}")
    print("\nall targets met" if not missed else "\ntargets missed: " + ", ".join(missed))
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        print(f"note: load average {load:.1f} on {os.cpu_count()} CPUs: other processes "
              "competed for the CPUs during this run")


if __name__ == "__main__":
    main()
