"""Overhead of the Lightning and Hugging Face Trainer callbacks at save_interval=10.

    .venv/bin/python bench/bench_callbacks.py [--processes 2] [--steps 4000] [--segment 50]

The bench model of `bench_hook.py` (MLP 256-256-256-10, batch 64, one torch thread) is trained
by each framework's own loop in three ways: plain; with `DebuggerCallback` (weights, gradients
and losses every 10 steps, plus what the callback adds: learning rates, the loss and the logged
metrics at saving steps); and, as a control, with the PyTorch hook alone registered on the
model by hand (the same collections and schedule, no callback).

The three fits run in one process at once, each in its own thread, but never together: they
take turns of `--segment` steps (five saving cycles), one side at a time, rotating which side
goes first in each round. The speed of this kind of VM drifts by up to 2x over seconds (a plain
fit read 2.6 ms per step in one second and 5.1 ms in another, at load 0.5), so fits timed one
after another cannot resolve a few percent; turns of a fraction of a second put every side
through the same phases of the machine. A turn is timed from its first step to the start of
the next turn's, both as wall time and as CPU time of the fit's thread; each side's setup, its
first `--warmup` steps (a new hook's first saving steps are cold) and its last turn (the fit's
teardown) are not counted. Per round the overhead is a side's turn over the plain turn of the
same round; the verdict rests on the median over rounds and its 95% confidence interval
(order statistics: a turn the VM stalled moves a mean, not a median); the mean with its
standard error and the ratio of the sums are printed beside it. The writer process's work for
a turn's last saving step can spill into the next turn (of whichever side): with five saving
steps per turn, that is a fifth of it at most.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

FRAMEWORKS = ("lightning", "huggingface")
SIDES = ("plain", "callback", "hook")
SAVE_INTERVAL = 10
COLLECTIONS = ["weights", "gradients", "losses"]
TARGET_PCT = 5.0


class Turns:
    """Lets one of several threads run at a time: rounds in which every side runs one turn,
    the side that goes first rotating from round to round. A side that leaves (its fit ended
    or failed) is skipped from then on."""

    def __init__(self, sides: tuple[str, ...]) -> None:
        self.sides = sides
        self.left: set[str] = set()
        self.round = 0
        self.pos = 0
        self._cond = threading.Condition()

    def _order(self) -> list[str]:
        k = self.round % len(self.sides)
        return [s for s in self.sides[k:] + self.sides[:k] if s not in self.left]

    def _current(self) -> str | None:
        order = self._order()
        return order[self.pos] if order else None

    def wait(self, side: str) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._current() == side)

    def _advance(self) -> None:
        order = self._order()
        self.pos += 1
        if self.pos >= len(order):
            self.round += 1
            self.pos = 0
        self._cond.notify_all()

    def pass_on(self, side: str) -> None:
        """Ends `side`'s turn (it must hold it) and waits for its next one."""
        with self._cond:
            self._advance()
            self._cond.wait_for(lambda: self._current() == side)

    def leave(self, side: str) -> None:
        with self._cond:
            index = self._order().index(side)
            self.left.add(side)
            if index < self.pos:
                self.pos -= 1
            if self.pos >= len(self._order()):
                self.round += 1
                self.pos = 0
            self._cond.notify_all()


class TurnClock:
    """Called by a fit at the start of every step: at every `segment`-th step it ends the
    thread's turn (recording its wall and thread CPU time when the turn was one of the timed
    ones) and waits for the next."""

    def __init__(self, turns: Turns, side: str, segment: int, first: int, last: int) -> None:
        self.turns, self.side, self.segment = turns, side, segment
        self.first, self.last = first, last  # the timed turns start at steps first..last-segment
        self.step = 0
        self.started: tuple[float, float] | None = None
        self.times: list[tuple[float, float]] = []

    def __call__(self) -> None:
        if self.step % self.segment == 0 and self.step:
            now = (time.perf_counter(), time.thread_time())
            start = self.step - self.segment
            if self.started is not None and self.first <= start and self.step <= self.last:
                self.times.append((now[0] - self.started[0], now[1] - self.started[1]))
            self.turns.pass_on(self.side)
            self.started = (time.perf_counter(), time.thread_time())
        self.step += 1


def _model_and_batches():
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    batches = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(8)]
    return model, batches


def _debugging(side: str, framework: str, model, out_dir: str):
    """(the callback or None, the hook or None) for one side of the comparison."""
    import smdebug_lite as smd

    config = smd.SaveConfig(save_interval=SAVE_INTERVAL)
    if side == "callback":
        if framework == "lightning":
            from smdebug_lite.lightning import DebuggerCallback
        else:
            from smdebug_lite.huggingface import DebuggerCallback
        cb = DebuggerCallback(out_dir, save_config=config, include_collections=COLLECTIONS)
        return cb, cb.hook
    if side == "hook":  # every forward pass of `model` is a step, as in a hand-written loop
        from smdebug_lite.pytorch import Hook

        hook = Hook(out_dir, save_config=config, include_collections=COLLECTIONS)
        hook.register_module(model)
        hook.set_mode(smd.modes.TRAIN)
        return None, hook
    return None, None


def _lightning_fit(side: str, clock: TurnClock, batches_total: int, out_dir: str) -> None:
    import lightning.pytorch as L
    import torch
    import torch.nn.functional as F

    net, batches = _model_and_batches()

    class Bench(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class Clock(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            clock()

    cb, hook = _debugging(side, "lightning", net, out_dir)
    data = torch.utils.data.DataLoader([batches[i % 8] for i in range(batches_total)],
                                       batch_size=None)
    trainer = L.Trainer(max_epochs=1, callbacks=[Clock()] + ([cb] if cb else []), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(Bench(), data)
    if hook is not None:
        hook.close()


def _huggingface_fit(side: str, clock: TurnClock, batches_total: int, out_dir: str) -> None:
    import torch.nn.functional as F
    from torch import nn
    from transformers import Trainer, TrainerCallback, TrainingArguments

    net, batches = _model_and_batches()

    class Bench(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x, labels):
            return {"loss": F.cross_entropy(self.net(x), labels)}

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock()

    model = Bench()
    cb, hook = _debugging(side, "huggingface", model, out_dir)
    data = [{"x": batches[i % 8][0], "labels": batches[i % 8][1]} for i in range(batches_total)]
    args = TrainingArguments(output_dir=os.path.join(out_dir, "hf"), per_device_train_batch_size=1,
                             max_steps=batches_total, learning_rate=0.01, optim="sgd",
                             lr_scheduler_type="constant", save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[Clock()] + ([cb] if cb else []),
                      data_collator=lambda items: items[0])  # (the items are whole batches)
    trainer.train()
    if hook is not None:
        hook.close()


def _pin_writer_apart() -> int | None:
    """Starts the writer process now and keeps it on one CPU and the fits' threads on another
    (returned): the three sides then run on the same CPU. Left to the scheduler, each fit's
    thread stays on the CPU it first ran on, and the two vCPUs of this VM differ in speed by
    more than the effect measured (one process read the hook alone at -7%, the next at +8%)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        return None
    from smdebug_lite.writer.process.lifecycle import writer_process

    proc = writer_process()
    if proc is None:
        return None
    os.sched_setaffinity(proc.pid, {cpus[-1]})
    return cpus[0]


def _worker(argv: list[str]) -> None:
    """One process: the three sides' fits in turns. Prints each side's timed turns."""
    framework, steps, warmup, segment = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    if framework == "lightning":
        import lightning.pytorch  # noqa: F401  (imported once, before the threads)
        fit: Callable[..., None] = _lightning_fit
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import transformers  # noqa: F401
        fit = _huggingface_fit
    # Every side runs the same steps: its untimed first turns, the timed ones, and a last
    # turn (ended by the fit's end, not timed) that holds the teardown.
    total = warmup + steps + segment
    turns = Turns(SIDES)
    clocks = {side: TurnClock(turns, side, segment, warmup, warmup + steps) for side in SIDES}
    errors: list[str] = []

    training_cpu = _pin_writer_apart()

    def run(side: str, out_dir: str) -> None:
        if training_cpu is not None:
            os.sched_setaffinity(threading.get_native_id(), {training_cpu})
        turns.wait(side)
        try:
            fit(side, clocks[side], total, out_dir)
        except BaseException as e:  # reported by the parent; the other sides go on
            errors.append(f"{side}: {type(e).__name__}: {e}")
        finally:
            turns.leave(side)

    with tempfile.TemporaryDirectory() as tmp:
        threads = [threading.Thread(target=run, args=(side, os.path.join(tmp, side)),
                                    name=f"fit-{side}") for side in SIDES]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise SystemExit("; ".join(errors))
    print("@@RESULT@@" + json.dumps({side: c.times for side, c in clocks.items()}))


def _measure(framework: str, steps: int, warmup: int, segment: int) -> dict[str, list]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               SMDEBUG_LOG_LEVEL="error", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, __file__, "--worker", framework, str(steps),
                           str(warmup), str(segment)], capture_output=True, text=True, env=env,
                          timeout=3600)
    marker = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")]
    if proc.returncode != 0 or not marker:
        raise SystemExit(f"{framework} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    times = json.loads(marker[0][len("@@RESULT@@"):])
    counts = {len(v) for v in times.values()}
    if len(counts) != 1 or not counts.pop():
        raise SystemExit(f"{framework} worker timed unequal turns: "
                         f"{ {k: len(v) for k, v in times.items()} }")
    return times


def _overheads(rounds: dict[str, list], side: str, which: int) -> list[float]:
    """Per round: % of the side's turn over the plain turn (which: 0 wall, 1 thread CPU)."""
    return [100 * (s[which] / p[which] - 1)
            for s, p in zip(rounds[side], rounds["plain"], strict=True)]


def _sum_ratio(rounds: dict[str, list], side: str, which: int) -> float:
    return 100 * (sum(s[which] for s in rounds[side])
                  / sum(p[which] for p in rounds["plain"]) - 1)


def _mean_se(xs: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(xs)
    se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    return mean, se


def median_interval(xs: list[float]) -> tuple[float, float, float]:
    """(median, low, high): the median and a 95% confidence interval for it from the order
    statistics (sign test, normal approximation), which a few stalled turns cannot move."""
    s = sorted(xs)
    n = len(s)
    k = max(0, int(n / 2 - 1.96 * n ** 0.5 / 2))
    return statistics.median(s), s[k], s[n - 1 - k]


def _verdict(low: float, high: float) -> str:
    if high <= TARGET_PCT:
        return "within target"
    return "over target" if low > TARGET_PCT else "not shown"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        _worker(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=2, help="processes per framework")
    ap.add_argument("--steps", type=int, default=4000, help="timed steps per side and process")
    ap.add_argument("--warmup", type=int, default=200, help="untimed steps first in each fit")
    ap.add_argument("--segment", type=int, default=50,
                    help="steps per turn (a multiple of the save interval, 10)")
    ap.add_argument("--only", choices=FRAMEWORKS)
    args = ap.parse_args(argv)
    if args.segment % SAVE_INTERVAL or args.steps % args.segment or args.warmup % args.segment:
        ap.error(f"--segment must be a multiple of {SAVE_INTERVAL}, and --steps and --warmup "
                 "multiples of --segment")
    frameworks = [args.only] if args.only else list(FRAMEWORKS)
    rounds: dict[str, dict[str, list]] = {f: {s: [] for s in SIDES} for f in frameworks}
    loads = [os.getloadavg()[0]]
    print(f"load average {loads[0]:.2f} at the start", flush=True)
    for r in range(args.processes):
        for fw in frameworks if r % 2 == 0 else frameworks[::-1]:
            new = _measure(fw, args.steps, args.warmup, args.segment)
            for side in SIDES:
                rounds[fw][side].extend(new[side])
            loads.append(os.getloadavg()[0])
            print(f"process {r + 1}/{args.processes} {fw}: {len(new['plain'])} rounds, overhead "
                  f"(sums) callback {_sum_ratio(new, 'callback', 0):+.2f}%, hook alone "
                  f"{_sum_ratio(new, 'hook', 0):+.2f}% (load average {loads[-1]:.2f})",
                  flush=True)
    print(f"\nOverhead at save_interval={SAVE_INTERVAL} ({', '.join(COLLECTIONS)}; bench model), "
          f"turns of {args.segment} steps, {args.steps} timed steps per side and process after "
          f"{args.warmup}; per round, mean ± standard error and median; target <= "
          f"{TARGET_PCT:.0f}%; load average {min(loads):.2f} to {max(loads):.2f}")
    print(f"{'framework':<12} {'side':<9} {'rounds':>6} {'ms/step':>8} {'wall: median [95% CI]':>26} "
          f"{'mean ± s.e.':>17} {'sums':>8} {'thread CPU: median [95% CI]':>32}  verdict (wall; CPU)")
    for fw, by_side in rounds.items():
        for side in SIDES:
            ms = 1000 * statistics.median(t[0] for t in by_side[side]) / args.segment
            if side == "plain":
                print(f"{fw:<12} {side:<9} {len(by_side[side]):>6} {ms:>8.3f}")
                continue
            wall, cpu = _overheads(by_side, side, 0), _overheads(by_side, side, 1)
            (wmed, wlo, whi), (cmed, clo, chi) = median_interval(wall), median_interval(cpu)
            wm, ws = _mean_se(wall)
            verdict = (f"{_verdict(wlo, whi)}; {_verdict(clo, chi)}" if side == "callback"
                       else "(control)")
            print(f"{fw:<12} {side:<9} {len(wall):>6} {ms:>8.3f} {wmed:>+8.2f}% "
                  f"[{wlo:+.2f}, {whi:+.2f}]% {wm:>+8.2f}% ± {ws:.2f}% "
                  f"{_sum_ratio(by_side, side, 0):>+7.2f}% {cmed:>+13.2f}% [{clo:+.2f}, "
                  f"{chi:+.2f}]%  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
