"""Helpers shared by the rule tests (no tests here): writing small trials with our writer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from smdebug_lite.config import Collection, CollectionManager
from smdebug_lite.config.reductions import reduction_tensor_name
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter


@dataclass
class Step:
    step: int
    tensors: Mapping[str, np.ndarray]
    mode: ModeKeys = ModeKeys.TRAIN
    mode_step: int | None = None
    reductions: Mapping[tuple[str, str, bool], float] = field(default_factory=dict)


def collections_json(collections: Mapping[str, Iterable[str]], num_workers: int = 1) -> str:
    cm = CollectionManager(create_default=True)
    for name, names in collections.items():
        cm.add(Collection(name, tensor_names=list(names)))
    return cm.export(num_workers=num_workers)


class TrialBuilder:
    """Writes steps into an out_dir with the library's TrialWriter."""

    def __init__(self, out_dir: str, collections: Mapping[str, Iterable[str]] | None = None,
                 worker: str = "worker_0", num_workers: int = 1) -> None:
        self.writer = TrialWriter(out_dir, worker)
        self.writer.write_collections(collections_json(collections or {}, num_workers))
        self.out_dir = out_dir
        self._mode_steps: dict[ModeKeys, int] = {}

    def add(self, s: Step) -> None:
        ms = s.mode_step
        if ms is None:
            ms = self._mode_steps.get(s.mode, -1) + 1
        self._mode_steps[s.mode] = ms
        sw = self.writer.new_step(s.step, s.mode, ms)
        for name, value in s.tensors.items():
            sw.add_tensor(name, np.asarray(value))
        for (name, red, is_abs), value in s.reductions.items():
            sw.add_tensor(reduction_tensor_name(name, red, is_abs), np.asarray(value))
        self.writer.submit(sw)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def write_trial(out_dir: str, steps: Iterable[Step],
                collections: Mapping[str, Iterable[str]] | None = None, end: bool = True) -> str:
    b = TrialBuilder(out_dir, collections)
    for s in steps:
        b.add(s)
    if end:
        b.close()
    else:
        b.flush()
    return out_dir


def scalar_steps(n: int, name: str = "loss", value=lambda i: float(i),
                 mode: ModeKeys = ModeKeys.TRAIN) -> list[Step]:
    return [Step(i, {name: np.array(value(i), dtype=np.float32)}, mode) for i in range(n)]


def write_live(out_dir: str, steps: list[Step], delay: float,
               collections: Mapping[str, Iterable[str]] | None = None,
               close: bool = True) -> threading.Thread:
    """Write steps from a thread, `delay` seconds apart (a training job in progress)."""

    def run() -> None:
        b = TrialBuilder(out_dir, collections)
        b.flush()
        for s in steps:
            time.sleep(delay)
            b.add(s)
            b.flush()
        if close:
            b.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# -- PyTorch training with our hook ------------------------------------------------------------


@dataclass
class TrainLog:
    """What the training loop saw, per global step: mode, loss, and any extra facts."""

    out_dir: str
    modes: list[ModeKeys] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    facts: list[dict] = field(default_factory=list)

    def first(self, predicate) -> int | None:
        """The first global step whose facts satisfy `predicate` (the expected firing step)."""
        for step, f in enumerate(self.facts):
            if predicate(f):
                return step
        return None


def train_torch(out_dir: str, model, batches, *, loss_fn=None, lr: float = 0.1, steps: int = 10,
                include_collections=("weights", "gradients", "losses"), include_regex=None,
                phases=None, optimizer: str = "sgd", on_train_step=None, on_eval_step=None,
                reduction_config=None, close: bool = True, step_delay: float = 0.0) -> TrainLog:
    """Train `model` with an smdebug-lite Hook saving every step.

    `batches(mode, i)` gives (x, y) for the i-th step of a mode. `phases` is a list of
    (mode, n_steps) (default: TRAIN for `steps`). `on_train_step(model, x, y, out, loss)` runs
    after backward, before the optimizer step, and returns a dict of facts for that step.
    """
    import torch

    from smdebug_lite.pytorch import Hook, SaveConfig

    torch.set_num_threads(1)
    loss_fn = loss_fn or torch.nn.CrossEntropyLoss()
    hook = Hook(out_dir, save_config=SaveConfig(save_interval=1),
                include_collections=list(include_collections),
                include_regex=list(include_regex) if include_regex else None,
                reduction_config=reduction_config)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.Adam(params, lr=lr) if optimizer == "adam"
           else torch.optim.SGD(params, lr=lr))
    log = TrainLog(out_dir)
    counters: dict[ModeKeys, int] = {}
    for mode, n in phases or [(ModeKeys.TRAIN, steps)]:
        hook.set_mode(mode)
        model.train(mode == ModeKeys.TRAIN)
        for _ in range(n):
            i = counters.get(mode, 0)
            counters[mode] = i + 1
            x, y = batches(mode, i)
            facts: dict = {}
            if mode == ModeKeys.TRAIN:
                opt.zero_grad()
                out = model(x)
                loss = loss_fn(out, y)
                loss.backward()
                if on_train_step is not None:
                    facts = on_train_step(hook, model, x, y, out, loss) or {}
                opt.step()
            else:
                with torch.no_grad():
                    out = model(x)
                    loss = loss_fn(out, y)
                if on_eval_step is not None:
                    facts = on_eval_step(hook, model, x, y, out, loss) or {}
            log.modes.append(mode)
            log.losses.append(float(loss.detach()))
            log.facts.append(facts)
            if step_delay:
                time.sleep(step_delay)
    if close:
        hook.close()
    log.hook = hook  # type: ignore[attr-defined]
    return log


def fixed_batches(x, y):
    """The same batch at every step (deterministic loss curves)."""
    return lambda mode, i: (x, y)
