"""Overhead of the Lightning and Hugging Face Trainer callbacks at save_interval=10.

    .venv/bin/python bench/bench_callbacks.py [--processes 2] [--blocks 8] [--steps 400]

The bench model of `bench_hook.py` (MLP 256-256-256-10, batch 64, one torch thread) is trained
by each framework's own loop in three ways: plain; with `DebuggerCallback` (weights, gradients
and losses every 10 steps, plus what the callback adds: learning rates, the loss and the logged
metrics at saving steps); and, as a control, with the PyTorch hook alone registered on the
model by hand (the same collections and schedule, no callback). Each process runs blocks of
six fits of one framework in the order plain, callback, hook, hook, callback, plain, so that a
drift of the machine's speed weighs on every side alike; processes of the two frameworks
alternate. A timing callback (on every side) times each fit's steps after `--warmup`: a new
hook's first saving steps are cold (buffers allocated and first touched, the steady saving
cycle not yet found); with fits of 100 steps after 30 the callbacks read +12% to +32%
(median), the hook alone as much. Per block, the overhead is the mean of a side's two fits
over the mean of the two plain fits; the table gives the mean over blocks with its standard
error and the median, as wall time and as CPU time of the training thread (which the writer
process's work, on another CPU, does not count). The load average is printed before and after
each process: on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

FRAMEWORKS = ("lightning", "huggingface")
SIDES = ("plain", "callback", "hook")
BLOCK = ("plain", "callback", "hook", "hook", "callback", "plain")
SAVE_INTERVAL = 10
COLLECTIONS = ["weights", "gradients", "losses"]
TARGET_PCT = 5.0


def _model_and_batches():
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    batches = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(8)]
    return model, batches


def _per_step(stamps: list[tuple[float, float]], steps: int, warmup: int) -> tuple[float, float]:
    """(wall ms, training-thread CPU ms) per step over the measured steps."""
    (w0, c0), (w1, c1) = stamps[warmup], stamps[warmup + steps]
    return 1000 * (w1 - w0) / steps, 1000 * (c1 - c0) / steps


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


def _lightning_worker(side: str, steps: int, warmup: int, out_dir: str) -> tuple[float, float]:
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

    stamps: list[tuple[float, float]] = []

    class Clock(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            stamps.append((time.perf_counter(), time.thread_time()))

    cb, hook = _debugging(side, "lightning", net, out_dir)
    data = torch.utils.data.DataLoader([batches[i % 8] for i in range(warmup + steps + 1)],
                                       batch_size=None)
    trainer = L.Trainer(max_epochs=1, callbacks=[Clock()] + ([cb] if cb else []), logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(Bench(), data)
    if hook is not None:
        hook.close()
    return _per_step(stamps, steps, warmup)


def _huggingface_worker(side: str, steps: int, warmup: int, out_dir: str) -> tuple[float, float]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
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

    stamps: list[tuple[float, float]] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            stamps.append((time.perf_counter(), time.thread_time()))

    model = Bench()
    cb, hook = _debugging(side, "huggingface", model, out_dir)
    data = [{"x": batches[i % 8][0], "labels": batches[i % 8][1]} for i in range(warmup + steps + 1)]
    args = TrainingArguments(output_dir=os.path.join(out_dir, "hf"), per_device_train_batch_size=1,
                             max_steps=warmup + steps + 1, learning_rate=0.01, optim="sgd",
                             lr_scheduler_type="constant", save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[Clock()] + ([cb] if cb else []),
                      data_collator=lambda items: items[0])  # (the items are whole batches)
    trainer.train()
    if hook is not None:
        hook.close()
    return _per_step(stamps, steps, warmup)


def _worker(argv: list[str]) -> None:
    framework, blocks, steps, warmup = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    worker = _lightning_worker if framework == "lightning" else _huggingface_worker
    results: list[dict[str, list]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for side in SIDES:  # untimed: first-use costs of every side
            worker(side, 20, 10, os.path.join(tmp, f"warm-{side}"))
        for b in range(blocks):
            block: dict[str, list] = {side: [] for side in SIDES}
            for i, side in enumerate(BLOCK):
                block[side].append(worker(side, steps, warmup, os.path.join(tmp, f"{b}-{i}")))
            results.append(block)
    print("@@RESULT@@" + json.dumps(results))


def _measure(framework: str, blocks: int, steps: int, warmup: int) -> list[dict]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               SMDEBUG_LOG_LEVEL="error", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, __file__, "--worker", framework, str(blocks), str(steps),
                           str(warmup)], capture_output=True, text=True, env=env, timeout=3600)
    marker = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")]
    if proc.returncode != 0 or not marker:
        raise SystemExit(f"{framework} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(marker[0][len("@@RESULT@@"):])


def _overheads(blocks: list[dict], side: str, which: int) -> list[float]:
    """Per block: % of the side's mean over the plain mean (which: 0 wall, 1 CPU)."""
    return [100 * (statistics.fmean(x[which] for x in b[side])
                   / statistics.fmean(x[which] for x in b["plain"]) - 1) for b in blocks]


def _mean_se(xs: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(xs)
    se = statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else float("nan")
    return mean, se


def _verdict(mean: float, se: float) -> str:
    if mean + 2 * se <= TARGET_PCT:
        return "within target"
    return "over target" if mean - 2 * se > TARGET_PCT else "not shown"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        _worker(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=2, help="processes per framework")
    ap.add_argument("--blocks", type=int, default=8, help="blocks of six fits per process")
    ap.add_argument("--steps", type=int, default=400, help="timed steps per fit")
    ap.add_argument("--warmup", type=int, default=100, help="untimed steps first in each fit")
    ap.add_argument("--only", choices=FRAMEWORKS)
    args = ap.parse_args(argv)
    frameworks = [args.only] if args.only else list(FRAMEWORKS)
    blocks: dict[str, list[dict]] = {f: [] for f in frameworks}
    loads = [os.getloadavg()[0]]
    print(f"load average {loads[0]:.2f} at the start", flush=True)
    for r in range(args.processes):
        for fw in frameworks if r % 2 == 0 else frameworks[::-1]:
            new = _measure(fw, args.blocks, args.steps, args.warmup)
            blocks[fw].extend(new)
            loads.append(os.getloadavg()[0])
            print(f"process {r + 1}/{args.processes} {fw}: {len(new)} blocks, median wall overhead "
                  f"callback {statistics.median(_overheads(new, 'callback', 0)):+.1f}%, hook alone "
                  f"{statistics.median(_overheads(new, 'hook', 0)):+.1f}% (load average "
                  f"{loads[-1]:.2f})", flush=True)
    print(f"\nOverhead at save_interval={SAVE_INTERVAL} ({', '.join(COLLECTIONS)}; bench model), "
          f"{args.steps} steps per fit after {args.warmup}; mean over blocks ± standard error, "
          f"median; target <= {TARGET_PCT:.0f}%; load average {min(loads):.2f} to {max(loads):.2f}")
    print(f"{'framework':<12} {'side':<9} {'blocks':>6} {'ms/step':>8} {'wall overhead':>17} "
          f"{'median':>8} {'thread CPU overhead':>20}  verdict (wall; CPU)")
    for fw, bs in blocks.items():
        for side in SIDES:
            ms = statistics.median(x[0] for b in bs for x in b[side])
            if side == "plain":
                print(f"{fw:<12} {side:<9} {len(bs):>6} {ms:>8.3f}")
                continue
            wall, cpu = _overheads(bs, side, 0), _overheads(bs, side, 1)
            (wm, ws), (cm, cs) = _mean_se(wall), _mean_se(cpu)
            verdict = (f"{_verdict(wm, ws)}; {_verdict(cm, cs)}" if side == "callback"
                       else "(control)")
            print(f"{fw:<12} {side:<9} {len(bs):>6} {ms:>8.3f} {wm:>+9.2f}% ± {ws:.2f}% "
                  f"{statistics.median(wall):>+7.2f}% {cm:>+11.2f}% ± {cs:.2f}%  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
