"""Hook overhead: ms per training step, smdebug-lite against smdebug 1.0.34, in one run.

    .venv/bin/python bench/bench_hook.py [--steps 300] [--repeats 3] [--only pytorch] [--pool 30]

Each measurement runs in its own subprocess: ours with this interpreter, smdebug's with the
reference venv (tests/refvenv.py). Both import the hook as ``<package>.<framework>`` and use the
same scenario code, so only the library differs. The table gives ms per step, the time each
saved step adds over no hook, and the time ``close()`` took (writing that was deferred). For
PyTorch a last table pairs each run with a plain twin model trained in the same process in
alternating blocks (see ``pytorch_worker``): the steadier figure on a shared machine. Its
"floor" row is a hand-written hook that makes the same copies and writes nothing
(``bench/floor_hook.py``): what saving these tensors costs on the machine before any library
work, measured in the same run. ``--pool N`` then runs N more paired processes of each row
that has a target (ours only, with the floor and the A/A control interleaved) and says whether
the pooled mean is under the target with 95% confidence: one process cannot tell +4.5% from 5%.

Rows come from the functions in ROW_FUNCTIONS; a framework adds one (see ``pytorch_rows``) that
returns `Scenario`s and a worker function that `_worker` dispatches to by framework name.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Scenario:
    framework: str  # worker function key
    name: str  # shown in the table
    config: dict  # passed to the worker as JSON
    saved_every: int | None  # saved steps are 1 in `saved_every` (None: no hook)
    target_pct: float | None = None  # the target for its paired overhead (ours), if any

    @property
    def is_floor(self) -> bool:
        """The hand-written floor hook: the same code in every column, so no library ratio."""
        return bool(self.config.get("floor"))


# -- PyTorch -------------------------------------------------------------------------------------


def pytorch_rows() -> list[Scenario]:
    common = {"include_collections": ["weights", "gradients", "losses"]}
    return [
        Scenario("pytorch", "no hook", {"hook": False}, None),
        Scenario("pytorch", "weights+grads+losses, every step", {**common, "interval": 1}, 1),
        Scenario("pytorch", "weights+grads+losses, every 10 steps", {**common, "interval": 10}, 10,
                 target_pct=5.0),
        # The same copies by a hand-written hook that writes nothing (bench/floor_hook.py): what
        # any hook saving these tensors costs here. Both columns run the same code.
        Scenario("pytorch", "floor: copies only, every 10 steps", {"floor": True, "interval": 10}, 10),
        Scenario("pytorch", "reductions only, every step",
                 {**common, "interval": 1, "reductions": ["min", "max", "mean"], "norms": ["l2"]}, 1),
    ]


PAIRED_BLOCK = 50  # steps per block when the hooked model and its plain twin alternate


def pytorch_worker(pkg: str, config: dict, steps: int, warmup: int, out_dir: str) -> dict:
    """ms per step of the model, and of an identical model without hook trained in the same
    process in alternating blocks of PAIRED_BLOCK steps ("paired" figures): on a shared VM the
    speed of a whole process varies by more than the effect measured, while two loops
    interleaved in one process see the same machine."""
    import torch
    from torch import nn

    torch.set_num_threads(1)

    def make():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
        return m, torch.optim.SGD(m.parameters(), lr=0.01)

    model, opt = make()
    twin, twin_opt = make()
    loss_fn = nn.CrossEntropyLoss()
    twin_loss = nn.CrossEntropyLoss()
    xs = [torch.randn(64, 256) for _ in range(8)]
    ys = [torch.randint(0, 10, (64,)) for _ in range(8)]
    hook = None
    if config.get("floor"):
        from floor_hook import FloorHook  # (this file's folder is sys.path[0])

        hook = FloorHook(config["interval"])
        hook.register_module(model)
        hook.register_loss(loss_fn)
    elif config.get("hook", True):
        smd = __import__(f"{pkg}.pytorch", fromlist=["Hook"])
        rc = None
        if config.get("reductions") or config.get("norms"):
            rc = smd.ReductionConfig(reductions=config.get("reductions"), norms=config.get("norms"))
        hook = smd.Hook(out_dir=out_dir, save_config=smd.SaveConfig(save_interval=config["interval"]),
                        include_collections=config["include_collections"], reduction_config=rc)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        hook.set_mode(smd.modes.TRAIN)

    def step(i: int) -> None:
        opt.zero_grad()
        loss_fn(model(xs[i % 8]), ys[i % 8]).backward()
        opt.step()

    def twin_step(i: int) -> None:
        twin_opt.zero_grad()
        twin_loss(twin(xs[i % 8]), ys[i % 8]).backward()
        twin_opt.step()

    for i in range(warmup):
        step(i)
        twin_step(i)
    elapsed = cpu = twin_elapsed = twin_cpu = 0.0
    ratios = []  # per pair of blocks: hooked time / twin time
    wall, thread = time.perf_counter, time.thread_time
    for n, lo in enumerate(range(warmup, warmup + steps, PAIRED_BLOCK)):
        block = range(lo, min(lo + PAIRED_BLOCK, warmup + steps))
        # Which model goes first alternates: the first block after a switch runs slower (an
        # A/A run, "no hook" below, shows it), and always giving that to one side biases the pair.
        first, second = (step, twin_step) if n % 2 == 0 else (twin_step, step)
        w0, c0 = wall(), thread()
        for i in block:
            first(i)
        w1, c1 = wall(), thread()
        for i in block:
            second(i)
        w2, c2 = wall(), thread()
        if n % 2 == 0:
            elapsed, cpu = elapsed + w1 - w0, cpu + c1 - c0
            twin_elapsed, twin_cpu = twin_elapsed + w2 - w1, twin_cpu + c2 - c1
            ratios.append((w1 - w0) / (w2 - w1))
        else:
            twin_elapsed, twin_cpu = twin_elapsed + w1 - w0, twin_cpu + c1 - c0
            elapsed, cpu = elapsed + w2 - w1, cpu + c2 - c1
            ratios.append((w2 - w1) / (w1 - w0))
    close_s = 0.0
    if hook is not None:
        t = time.perf_counter()
        hook.close()
        close_s = time.perf_counter() - t
    return {"ms_per_step": 1000 * elapsed / steps, "cpu_ms_per_step": 1000 * cpu / steps,
            "close_ms": 1000 * close_s, "paired_ms_per_step": 1000 * twin_elapsed / steps,
            "paired_cpu_ms_per_step": 1000 * twin_cpu / steps,
            "block_median_ratio": statistics.median(ratios)}


ROW_FUNCTIONS: list[Callable[[], list[Scenario]]] = [pytorch_rows]
WORKERS: dict[str, Callable[..., dict]] = {"pytorch": pytorch_worker}

import bench_hook_tf_xgb  # noqa: E402  (Keras and XGBoost rows; this file's folder is sys.path[0])

bench_hook_tf_xgb.register(ROW_FUNCTIONS, WORKERS, Scenario)


# -- driver --------------------------------------------------------------------------------------


def _worker(argv: list[str]) -> None:
    framework, pkg, config, steps, warmup = argv[0], argv[1], json.loads(argv[2]), int(argv[3]), int(argv[4])
    out_dir = tempfile.mkdtemp(prefix="bench-hook-")
    # Registered before any hook exists, so it runs after the hooks' own exit handlers (smdebug
    # writes its end-of-job marker at exit) and nothing is left in /tmp.
    atexit.register(shutil.rmtree, out_dir, ignore_errors=True)
    result = WORKERS[framework](pkg, config, steps, warmup, os.path.join(out_dir, "run"))
    print("@@RESULT@@" + json.dumps(result))


def _ref_python() -> str | None:
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from refvenv import ref_python
    finally:
        sys.path.pop(0)
    py, reason = ref_python()
    if py is None:
        print(f"smdebug 1.0.34 column skipped: {reason}", file=sys.stderr)
    return py


def _measure(python: str, pkg: str, sc: Scenario, steps: int, warmup: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SMDEBUG_LOG_LEVEL"] = "error"
    cwd = "/tmp"
    if pkg == "smdebug_lite":
        env["PYTHONPATH"] = str(REPO)
        cwd = str(REPO)
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", sc.framework, pkg,
         json.dumps(sc.config), str(steps), str(warmup)],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=900)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("@@RESULT@@")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{pkg} {sc.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads(line[len("@@RESULT@@"):])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        _worker(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5, help="best of N interleaved runs per cell")
    ap.add_argument("--only", help="frameworks to run, comma-separated, e.g. keras,keras2 "
                                   "(default: all)")
    ap.add_argument("--pool", type=int, default=0, metavar="N",
                    help="then N more paired processes of each row with a target (ours only), "
                         "with the floor and the A/A control: the pooled mean decides the target")
    args = ap.parse_args(argv)
    impls = [("smdebug-lite", sys.executable, "smdebug_lite")]
    ref = _ref_python()
    if ref:
        impls.append(("smdebug 1.0.34", ref, "smdebug"))
    for rows in ROW_FUNCTIONS:
        only = set(args.only.split(",")) if args.only else None
        scenarios = [s for s in rows() if only is None or s.framework in only]
        if not scenarios:
            continue
        runs: dict[tuple[str, str], list[dict]] = {}
        # Interleaved (every cell once per round) so that a noisy moment hits all cells alike.
        for _ in range(args.repeats):
            for sc in scenarios:
                for label, python, pkg in impls:
                    runs.setdefault((sc.name, label), []).append(
                        _measure(python, pkg, sc, args.steps, args.warmup))
        for metric, title in (("ms_per_step", "wall-clock ms per training step"),
                              ("cpu_ms_per_step", "training-thread CPU ms per step")):
            if not all(metric in r for v in runs.values() for r in v):
                continue  # a worker that does not measure it (e.g. no CPU time)
            results = {k: min(v, key=lambda r: r[metric]) for k, v in runs.items()}
            _print_table(scenarios, impls, results, metric, title)
        _print_paired(scenarios, impls, runs)
        if args.pool > 0:
            _pool_targets(scenarios, impls[0], runs, args)
    return 0


def _pool_targets(scenarios: list[Scenario], ours: tuple[str, str, str], runs, args) -> None:
    """Settle each paired target on many processes: one process's figure moves by points on a
    shared VM (see docs/pytorch.md), its mean over tens of processes by a few tenths. The
    floor and the A/A control run interleaved with it, so the same moments of the VM hit all
    three. The target counts as met only when the upper bound of the mean's 95% interval is
    under it."""
    label, python, pkg = ours
    targets = [sc for sc in scenarios if sc.target_pct is not None]
    refs = [sc for sc in scenarios if sc.is_floor or sc.saved_every is None]
    if not targets or not all("paired_ms_per_step" in r for r in runs[(targets[0].name, label)]):
        return
    pooled = {sc.name: [_paired_overhead(r) for r in runs[(sc.name, label)]] for sc in targets + refs}
    for _ in range(args.pool):
        for sc in targets + refs:
            pooled[sc.name].append(_paired_overhead(_measure(python, pkg, sc, args.steps, args.warmup)))
    print(f"\n{targets[0].framework}: paired overhead pooled over {len(pooled[targets[0].name])} "
          f"processes of {args.steps} steps each ({label}; the runs above included)")
    for sc in refs + targets:
        xs = [100 * x for x in pooled[sc.name]]
        mean, error = _mean_se(xs)
        upper = mean + 1.96 * error
        kind = "A/A control" if sc.saved_every is None else sc.name
        line = (f"  {kind:40s} mean {mean:+.2f}% ± {error:.2f} (standard error), median "
                f"{statistics.median(xs):+.2f}%, 95% upper bound {upper:+.2f}%")
        if sc.target_pct is not None:
            verdict = "met" if upper < sc.target_pct else "not shown"
            line += f"\n  {'':40s} target under {sc.target_pct:g}%: {verdict}"
        print(line)


def _paired_overhead(run: dict) -> float:
    """A run's time per step against its plain twin's, less 1."""
    return run["ms_per_step"] / run["paired_ms_per_step"] - 1


def _print_paired(scenarios: list[Scenario], impls, runs) -> None:
    """Hook cost against the plain twin model trained in the same process (median of runs).
    The "no hook" row pairs two plain models: what the method itself reads as overhead."""
    hooked = [sc for sc in scenarios if sc.saved_every is not None]
    control = [sc for sc in scenarios if sc.saved_every is None]
    if not hooked or not all("paired_ms_per_step" in r for sc in hooked for label, _, _ in impls
                             for r in runs[(sc.name, label)]):
        return
    print(f"\n{scenarios[0].framework}: paired with a plain twin model in the same process "
          "(alternating blocks; median of runs). 'overhead': total time against the twin's;")
    print("'block med': the median over pairs of blocks, which a moment when the VM stalls one "
          "block does not move")
    header = f"{'scenario':40s}" + "".join(f"{label:>16s}{'overhead':>10s}{'block med':>10s}{'added/saved':>13s}"
                                             for label, _, _ in impls)
    print(header)
    print("-" * len(header))
    added: dict[tuple[str, str], float] = {}
    for sc in control + hooked:
        row = f"{sc.name + (' (A/A control)' if sc.saved_every is None else ''):40s}"
        for label, _, _ in impls:
            rs = runs[(sc.name, label)]
            if not all("paired_ms_per_step" in r for r in rs):
                continue
            ms = statistics.median([r["ms_per_step"] for r in rs])
            over = statistics.median(list(map(_paired_overhead, rs)))
            block = statistics.median([r.get("block_median_ratio", math.nan) - 1 for r in rs])
            if sc.saved_every is None:
                row += f"{ms:16.3f}{100 * over:+9.1f}%{100 * block:+9.1f}%{'-':>13s}"
                continue
            per_saved = statistics.median([(r["ms_per_step"] - r["paired_ms_per_step"]) * sc.saved_every
                                 for r in rs])
            added[(sc.name, label)] = per_saved
            row += f"{ms:16.3f}{100 * over:+9.1f}%{100 * block:+9.1f}%{per_saved:13.3f}"
        print(row)
    if len(impls) > 1:
        ours, theirs = impls[0][0], impls[1][0]
        for sc in hooked:
            if not sc.is_floor and added[(sc.name, theirs)] > 0:
                print(f"  {sc.name}: ours adds {added[(sc.name, ours)] / added[(sc.name, theirs)]:.2f}x "
                      "of smdebug's time per saved step (paired)")
    # One process's reading moves by points from run to run on a shared VM: every run's figure
    # for the library rows that save every few steps, and for the floor (same code in each column).
    ours = impls[0][0]
    for sc in hooked:
        if sc.saved_every and sc.saved_every > 1:
            each = sorted(100 * _paired_overhead(r) for r in runs[(sc.name, ours)])
            print(f"  {sc.name} ({ours}), each run: " + ", ".join(f"{x:+.1f}%" for x in each)
                  + _mean_and_error(each))


def _mean_and_error(xs: list[float]) -> str:
    """The runs' mean and its standard error: whether a run this size can tell a figure from a
    target a point away."""
    if len(xs) < 2:
        return ""
    mean, error = _mean_se(xs)
    return f"; mean {mean:+.1f}% ± {error:.1f} (standard error)"


def _mean_se(xs: list[float]) -> tuple[float, float]:
    """The mean of at least two figures and its standard error."""
    return statistics.mean(xs), statistics.stdev(xs) / math.sqrt(len(xs))


def _print_table(scenarios: list[Scenario], impls, results, metric: str, title: str) -> None:
    fw = scenarios[0].framework
    print(f"\n{fw}: {title} (best of runs); 'added/saved' = extra ms per saved step")
    header = f"{'scenario':40s}" + "".join(f"{label:>16s}{'added/saved':>13s}{'close ms':>10s}"
                                             for label, _, _ in impls)
    print(header)
    print("-" * len(header))
    base = {label: results[(s.name, label)][metric]
            for s in scenarios if s.saved_every is None for label, _, _ in impls}
    added: dict[tuple[str, str], float] = {}
    for sc in scenarios:
        row = f"{sc.name:40s}"
        for label, _, _ in impls:
            r = results[(sc.name, label)]
            if sc.saved_every is None or label not in base:
                extra = "-"
            else:
                per_saved = (r[metric] - base[label]) * sc.saved_every
                added[(sc.name, label)] = per_saved
                extra = f"{per_saved:.3f}"
            row += f"{r[metric]:16.3f}{extra:>13s}{r['close_ms']:10.1f}"
        print(row)
    if len(impls) > 1:
        ours, theirs = impls[0][0], impls[1][0]
        for sc in scenarios:
            if sc.is_floor:
                continue
            if (sc.name, ours) in added and (sc.name, theirs) in added and added[(sc.name, theirs)] > 0:
                print(f"  {sc.name}: ours adds {added[(sc.name, ours)] / added[(sc.name, theirs)]:.2f}x "
                      f"of smdebug's time per saved step")
    for sc in scenarios:
        if sc.saved_every and sc.saved_every > 1 and impls[0][0] in base:
            r = results[(sc.name, impls[0][0])][metric]
            print(f"  {sc.name}: {100 * (r / base[impls[0][0]] - 1):+.1f}% over no hook (smdebug-lite)")


if __name__ == "__main__":
    raise SystemExit(main())
