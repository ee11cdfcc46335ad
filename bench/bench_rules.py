"""Rule evaluation benchmark: smdebug-lite's built-in rules, and smdebug-style custom rules,
against smdebug 1.0.34 running the same rules on the same trial, in the same run.

Two trials (`--trials`), each of --steps steps, every step saved, training ended:

* pytorch-hook: a PyTorch training (MLP; gradients and the loss) written with smdebug-lite's
  hook;
* smdebug-written: the trial users have, written by smdebug 1.0.34 itself in the reference venv
  and not compacted: --tensors gradients (mean, max and l2 reductions saved beside each) in the
  `gradients` collection and a loss in `losses` (`smdebug_written_job.py`, layout "hook").

On each, in fresh processes, the variants interleaved, best of --repeat runs, `invoke_rule` over
the whole trial (every step evaluated; the run ends at the last step) is timed for:

* smdebug 1.0.34 (reference venv): hand-written rules as users write them from smdebug's docs,
  a `Rule` subclass whose `invoke_at_step` reads `self.base_trial.tensor(name)`'s
  `reduction_value(step, ...)` (HandVanishingGradient) or `value(step)` (HandExplodingTensor,
  HandLossNotDecreasing), run with smdebug's `invoke_rule` (NoMoreData caught at the end);
* smdebug-lite: the built-in `VanishingGradient`, `ExplodingTensor` and `LossNotDecreasing`;
* smdebug-lite: the same hand-written rules, unchanged (the custom-rule path).

Every rule is set so it never fires (healthy gradients; LossNotDecreasing with
diff_percent=-1e9, increase_threshold_percent=1e9). Printed per trial and rule: seconds of
`invoke_rule` for each variant, smdebug-lite's speedup over smdebug 1.0.34 (target: 10x on the
smdebug-written trial) and the time of `create_trial`.

    .venv/bin/python bench/bench_rules.py
    .venv/bin/python bench/bench_rules.py --trials smdebug-written
    .venv/bin/python bench/bench_rules.py --steps 300 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from smdebug_written_job import build_smdebug_job  # noqa: E402

# The same source runs on both libraries (smdebug's API); `smdebug` is smdebug-lite in our venv.
HAND_RULES = r'''
import numpy as np
from smdebug import modes
from smdebug.rules import Rule


class HandVanishingGradient(Rule):
    def __init__(self, base_trial, threshold="0.0000001"):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.count = 0

    def invoke_at_step(self, step):
        self.count += 1
        for name in self.base_trial.tensor_names(step=step, collection="gradients"):
            tensor = self.base_trial.tensor(name)
            if tensor.reduction_value(step, "mean", abs=True) < self.threshold:
                return True
        return False


class HandExplodingTensor(Rule):
    def __init__(self, base_trial, collection_names="gradients"):
        super().__init__(base_trial, action_str="")
        self.collections = [c.strip() for c in collection_names.split(",") if c.strip()]
        self.count = 0

    def invoke_at_step(self, step):
        self.count += 1
        for collection in self.collections:
            for name in self.base_trial.tensor_names(step=step, collection=collection):
                if not np.isfinite(self.base_trial.tensor(name).value(step)).all():
                    return True
        return False


class HandLossNotDecreasing(Rule):
    def __init__(self, base_trial, num_steps="10", diff_percent="0.1",
                 increase_threshold_percent="5"):
        super().__init__(base_trial, action_str="")
        self.num_steps = int(num_steps)
        self.diff_percent = float(diff_percent)
        self.increase = float(increase_threshold_percent)
        self.baselines = {}
        self.target = None
        self.count = 0

    def _target_mode(self):
        names = self.base_trial.tensor_names(collection="losses")
        key = (tuple(sorted(m.value for m in self.base_trial.modes())), len(names))
        if self.target is not None and (self.target[1] == modes.EVAL or self.target[0] == key):
            return self.target[1]
        target = modes.GLOBAL
        for m in (modes.EVAL, modes.TRAIN):
            if any(self.base_trial.tensor(n).steps(mode=m) for n in names):
                target = m
                break
        self.target = (key, target)
        return target

    def invoke_at_step(self, step):
        self.count += 1
        mode, mode_step = self.base_trial.mode(step), self.base_trial.mode_step(step)
        target = self._target_mode()
        if target != modes.GLOBAL and mode != target:
            return False
        if target == modes.GLOBAL:
            mode, mode_step = modes.GLOBAL, step
        for name in self.base_trial.tensor_names(step=step, collection="losses"):
            loss = float(np.mean(self.base_trial.tensor(name).value(step)))
            base = self.baselines.get((mode, name))
            if base is None or (mode_step >= base[2] and base[0] == 0):
                self.baselines[(mode, name)] = [loss, mode_step, mode_step + self.num_steps]
                continue
            if mode_step < base[2]:
                continue
            decrease = (base[0] - loss) / abs(base[0]) * 100.0
            if decrease < 0 and -decrease <= self.increase:
                base[2] = mode_step + self.num_steps
                continue
            if decrease < self.diff_percent:
                return True
            self.baselines[(mode, name)] = [loss, mode_step, mode_step + self.num_steps]
        return False
'''

NEVER_FIRE = {"diff_percent": "-1e9", "increase_threshold_percent": "1e9"}
# (built-in rule, the hand-written rule with the same logic, parameters of both)
CASES = (
    ("VanishingGradient", "HandVanishingGradient", {}),
    ("ExplodingTensor", "HandExplodingTensor", {"collection_names": "gradients"}),
    ("LossNotDecreasing", "HandLossNotDecreasing", NEVER_FIRE),
)
TRIALS = ("pytorch-hook", "smdebug-written")
TARGET = 10.0  # speedup over smdebug 1.0.34 on the trial it wrote

CHILD = r'''
import json, logging, sys, time
logging.disable(logging.CRITICAL)
LIB, PATH, WHICH, REPEAT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
KW = json.loads(sys.argv[5])
if LIB == "smdebug_lite":
    import _smdebug_lite_alias
    _smdebug_lite_alias.install()
from smdebug.trials import create_trial
from smdebug.rules import invoke_rule
from smdebug.exceptions import NoMoreData
exec(compile(sys.argv[6], "hand_rules", "exec"))
if WHICH.startswith("builtin:"):
    import smdebug_lite.rules.builtin as builtin
    cls = getattr(builtin, WHICH.split(":", 1)[1])
else:
    cls = globals()[WHICH]
best_invoke, best_load, steps = None, None, None
for _ in range(REPEAT):
    t0 = time.perf_counter()
    trial = create_trial(PATH)
    t1 = time.perf_counter()
    rule = cls(trial, **KW)
    t2 = time.perf_counter()
    try:
        res = invoke_rule(rule)
    except NoMoreData:
        res = None
    t3 = time.perf_counter()
    if res is not None:
        assert res.status == "NoIssuesFound", res
        steps = res.steps_evaluated
    else:
        steps = rule.count
    best_invoke = min(best_invoke or 1e9, t3 - t2)
    best_load = min(best_load or 1e9, t1 - t0)
print(json.dumps({"invoke_s": best_invoke, "load_s": best_load, "steps": steps}))
'''


def build_trial(path: Path, steps: int) -> None:
    """A healthy run: MLP on a fixed random task, gradients + loss saved at every step."""
    import torch
    from torch import nn

    from smdebug_lite.pytorch import Hook, SaveConfig

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10))
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(str(path), save_config=SaveConfig(save_interval=1),
                include_collections=["gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 32, generator=g), torch.randint(0, 10, (256,), generator=g)
    for i in range(steps):
        idx = torch.arange(i * 32, i * 32 + 32) % 256
        opt.zero_grad()
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
    hook.close()


def run_child(python: str, lib: str, path: Path, which: str, repeat: int, kw: dict,
              cwd: str) -> dict | None:
    env = dict(os.environ)
    if lib == "smdebug_lite":
        env["PYTHONPATH"] = str(REPO)
    else:
        env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", CHILD, lib, str(path), which, str(repeat),
                           json.dumps(kw), HAND_RULES], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=3600)
    if proc.returncode != 0:
        print(f"[{lib} {which} failed]\n{proc.stderr[-3000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_trials(args: argparse.Namespace, ref_py: str | None) -> dict[str, Path]:
    trials: dict[str, Path] = {}
    for kind in [k.strip() for k in args.trials.split(",") if k.strip()]:
        if kind == "pytorch-hook":
            path = Path(args.dir) / f"mlp_{args.steps}"
            if not (path / "training_job_end.ts").exists():
                t0 = time.perf_counter()
                build_trial(path, args.steps)
                print(f"wrote {args.steps}-step trial to {path} in "
                      f"{time.perf_counter() - t0:.1f}s")
        elif kind == "smdebug-written":
            if ref_py is None:
                print("[smdebug-written trial skipped: no reference venv]")
                continue
            path = Path(args.dir) / f"smdw_{args.steps}x{args.tensors}"
            build_smdebug_job(ref_py, path, args.steps, args.tensors, layout="hook")
        else:
            raise SystemExit(f"--trials: unknown {kind!r}; expected some of {TRIALS}")
        trials[kind] = path
    return trials


def best(a: dict | None, b: dict | None) -> dict | None:
    if a is None or b is None:
        return a or b
    return a if a["invoke_s"] <= b["invoke_s"] else b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--tensors", type=int, default=50,
                    help="gradients in the smdebug-written trial")
    ap.add_argument("--trials", default=",".join(TRIALS),
                    help=f"comma-separated, some of {', '.join(TRIALS)} (default: both)")
    ap.add_argument("--repeat", type=int, default=5, help="best of N (each library)")
    ap.add_argument("--dir", default=str(REPO / ".bench" / "rules"))
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    from refvenv import ref_python

    ref_py, reason = ref_python()
    if ref_py is None:
        print(f"[reference venv unavailable: {reason}]")
    trials = build_trials(args, ref_py)

    rows = []
    for kind, path in trials.items():
        for builtin, hand, kw in CASES:
            ref = ours = ours_hand = None
            # Interleaved, one fresh process per run: on a shared machine every variant samples
            # the same periods of load, and the best run of each is compared.
            for _ in range(args.repeat):
                if ref_py:
                    ref = best(ref, run_child(ref_py, "smdebug", path, hand, 1, kw, "/tmp"))
                ours = best(ours, run_child(sys.executable, "smdebug_lite", path,
                                            f"builtin:{builtin}", 1, kw, str(REPO)))
                ours_hand = best(ours_hand, run_child(sys.executable, "smdebug_lite", path, hand,
                                                      1, kw, str(REPO)))
            rows.append({"trial": kind, "rule": builtin, "smdebug": ref, "lite_builtin": ours,
                         "lite_custom": ours_hand})

    def speedup(theirs: dict | None, mine: dict | None) -> float | None:
        if not theirs or not mine or mine["invoke_s"] <= 0:
            return None
        return theirs["invoke_s"] / mine["invoke_s"]

    def cell(r: dict | None) -> str:
        return "n/a" if r is None else f"{r['invoke_s']:.3f} [{r['load_s']:.2f}]"

    def times(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1f}x"

    print(f"\nRule evaluation over {args.steps} steps: seconds of invoke_rule, best of "
          f"{args.repeat} (create_trial seconds in brackets); target {TARGET:g}x on the "
          "smdebug-written trial\n")
    head = (f"{'trial':<16} {'rule':<18} {'smdebug 1.0.34':>16} {'lite built-in':>16} "
            f"{'speedup':>8} {'lite, same custom rule':>23} {'speedup':>8}  met")
    print(head)
    print("-" * len(head))
    missed = []
    for row in rows:
        sp = speedup(row["smdebug"], row["lite_builtin"])
        sp2 = speedup(row["smdebug"], row["lite_custom"])
        met = ""
        if row["trial"] == "smdebug-written" and sp is not None and sp2 is not None:
            met = "yes" if min(sp, sp2) >= TARGET else "NO"
            if met == "NO":
                missed.append(f"{row['rule']} {min(sp, sp2):.1f}x")
        print(f"{row['trial']:<16} {row['rule']:<18} {cell(row['smdebug']):>16} "
              f"{cell(row['lite_builtin']):>16} {times(sp):>8} "
              f"{cell(row['lite_custom']):>23} {times(sp2):>8}  {met}")
        row["speedup"], row["speedup_custom"] = sp, sp2
    if missed:
        print("\ntargets missed on the smdebug-written trial: " + ", ".join(missed))
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": args.steps, "tensors": args.tensors,
                                               "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
