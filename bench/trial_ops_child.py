"""Times the trial operations of `bench_trial_smdebug_written.py` in a fresh process.

Runs with either library (same API), and with either python (smdebug-lite's venv or the
reference venv with smdebug 1.0.34):

    python trial_ops_child.py MODULE PATH OPS REPEAT BUDGET MODE

MODE "best": every operation runs REPEAT times on a fresh trial, the fastest run counts; with
smdebug-lite the result also gives what the operation read: event file reads (whole or ranged)
and, on S3, requests.
MODE "sample": the operations made of many independent calls (one tensor's values, which
smdebug computes as one `value(step)` per step; all values; every reduction) time calls in a
random order (`loop`: in step order) until BUDGET seconds are spent, and the total is
extrapolated; they share one
fresh trial (loading one on S3 takes smdebug several seconds), and loading still runs REPEAT
times. Prints one line: RESULT {op: {"s", "cpu", "sampled"}}.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time

SCALAR = "layer1.bias"  # a one-element tensor in both benchmark trials (shape ())


def counts(tr) -> tuple[int | None, int | None]:
    """(event file reads, S3 requests) so far; None where the library does not count."""
    return (getattr(tr, "event_file_reads", None),
            getattr(getattr(tr, "storage", None), "requests", None))


def spent(before: tuple, after: tuple) -> dict:
    return {k: (b - a if a is not None and b is not None else None)
            for k, a, b in zip(("reads", "requests"), before, after, strict=True)}


def main() -> None:
    module, path, ops, repeat, budget, mode = sys.argv[1:7]
    ops_list, repeat_n, budget_s = ops.split(","), int(repeat), float(budget)
    create_trial = __import__(module + ".trials", fromlist=["create_trial"]).create_trial
    wall, cpu = time.perf_counter, time.process_time
    out: dict[str, dict] = {}

    def fresh():
        gc.collect()  # the previous trial (a reference cycle) is freed here, untimed
        tr = create_trial(path)
        return tr, tr.tensor_names()

    def timed(fn, *args) -> tuple[float, float]:
        w0, c0 = wall(), cpu()
        fn(*args)
        return wall() - w0, cpu() - c0

    def best(fn) -> dict:
        runs = []
        for _ in range(repeat_n):
            tr, names = fresh()
            gc.collect()
            before = counts(tr)
            runs.append(timed(fn, tr, names))
            used = spent(before, counts(tr))
        return {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs), "sampled": None,
                **used}

    shared: list = []

    def sampled(calls_of, in_order: bool = False) -> dict:
        if not shared:
            shared.extend(fresh())
        tr, names = shared
        calls = calls_of(tr, names)
        if not in_order:
            random.Random(0).shuffle(calls)
        gc.collect()
        w0, c0, done = wall(), cpu(), 0
        for fn, *args in calls:
            fn(*args)
            done += 1
            if wall() - w0 > budget_s:
                break
        f = len(calls) / done
        return {"s": (wall() - w0) * f, "cpu": (cpu() - c0) * f,
                "sampled": None if done == len(calls) else [done, len(calls)]}

    def one(tr, names):
        t = tr.tensor(names[len(names) // 2])
        assert len(t.values()) == len(t.steps())

    def loop(tr, names):
        t = tr.tensor(names[len(names) // 2])
        for s in t.steps():
            t.value(s)

    def scalar(tr, names):
        t = tr.tensor(SCALAR)
        assert len(t.values()) == len(t.steps())

    def reduce_all(tr, names):
        for n in names:
            t = tr.tensor(n)
            for s in t.steps():
                t.reduction_value(s, "mean")

    def all_values(tr, names):
        for n in names:
            tr.tensor(n).values()

    def value_calls(tr, names, only=None):
        return [(tr.tensor(n).value, s) for n in (only or names) for s in tr.tensor(n).steps()]

    if "load" in ops_list:
        runs = []
        loaded: list = []

        def load() -> None:
            loaded[:] = [create_trial(path)]
            loaded[0].tensor_names()

        for _ in range(repeat_n):
            gc.collect()
            runs.append(timed(load))
        out["load"] = {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs),
                       "sampled": None, **spent((0, 0), counts(loaded[0]))}
        loaded.clear()
    middle = lambda tr, names: value_calls(tr, names, [names[len(names) // 2]])  # noqa: E731
    plans = {
        "one": (one, middle),
        "loop": (loop, middle),
        "scalar": (scalar, lambda tr, names: value_calls(tr, names, [SCALAR])),
        "reduce": (reduce_all, lambda tr, names: [(tr.tensor(n).reduction_value, s, "mean")
                                                  for n in names for s in tr.tensor(n).steps()]),
        "all": (all_values, value_calls),
    }
    for op, (whole, calls_of) in plans.items():
        if op in ops_list:
            out[op] = (sampled(calls_of, in_order=op == "loop") if mode == "sample"
                       else best(whole))
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
