"""Times the trial operations of `bench_trial_smdebug_written.py` in a fresh process.

Runs with either library (same API), and with either python (smdebug-lite's venv or the
reference venv with smdebug 1.0.34):

    python trial_ops_child.py MODULE PATH OPS REPEAT BUDGET MODE

MODE "best": every operation runs REPEAT times on a fresh trial, the fastest run counts.
MODE "sample": the operations made of many independent calls (one tensor's values, which
smdebug computes as one `value(step)` per step; all values; every reduction) time calls in a
random order until BUDGET seconds are spent, and the total is extrapolated; they share one
fresh trial (loading one on S3 takes smdebug several seconds), and loading still runs REPEAT
times. Prints one line: RESULT {op: {"s", "cpu", "sampled"}}.
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time


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
            runs.append(timed(fn, tr, names))
        return {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs), "sampled": None}

    shared: list = []

    def sampled(calls_of) -> dict:
        if not shared:
            shared.extend(fresh())
        tr, names = shared
        calls = calls_of(tr, names)
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
        for _ in range(repeat_n):
            gc.collect()
            runs.append(timed(lambda: create_trial(path).tensor_names()))
        out["load"] = {"s": min(r[0] for r in runs), "cpu": min(r[1] for r in runs),
                       "sampled": None}
    plans = {
        "one": (one, lambda tr, names: value_calls(tr, names, [names[len(names) // 2]])),
        "reduce": (reduce_all, lambda tr, names: [(tr.tensor(n).reduction_value, s, "mean")
                                                  for n in names for s in tr.tensor(n).steps()]),
        "all": (all_values, value_calls),
    }
    for op, (whole, calls_of) in plans.items():
        if op in ops_list:
            out[op] = sampled(calls_of) if mode == "sample" else best(whole)
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
