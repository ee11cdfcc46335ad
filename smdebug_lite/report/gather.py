"""What a report shows of one trial, read through the Trial API within fixed budgets.

Everything here is plain data (lists of floats), so plotting and HTML never touch the trial.
Each section reads a bounded number of steps (`sampling.spread`) and tensors, and records
what it left out, so the page can say so instead of silently showing less.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smdebug_lite.exceptions import SMDebugError
from smdebug_lite.modes import ModeKeys
from smdebug_lite.report.sampling import spread

MAX_CURVE_POINTS = 1000  # per loss curve
MAX_HEATMAP_STEPS = 120
MAX_HEATMAP_LAYERS = 48
MAX_STAT_STEPS = 60
MAX_STAT_TENSORS = 24  # per group (weights, activations)
STAT_BYTES = 256 * 1024 * 1024  # raw values read per statistics tensor, about
HEATMAP_BYTES = 1024 * 1024 * 1024  # raw gradients read for the heatmap, about

Progress = Callable[[str], None]


@dataclass
class Curve:
    """One scalar tensor over the steps of one mode (x: mode steps)."""

    tensor: str
    mode: str
    steps: list[int]
    values: list[float]
    total_steps: int  # saved steps of this tensor in this mode, before downsampling


@dataclass
class Heatmap:
    """Per-layer gradient L2 norms: rows are layers, columns global steps (NaN: not saved)."""

    layers: list[str]
    steps: list[int]
    norms: np.ndarray
    total_layers: int
    total_steps: int


@dataclass
class TensorStats:
    """min / mean / std / max / L2 norm of one tensor at a spread of global steps."""

    tensor: str
    shape: tuple[int, ...] | None
    dtype: str
    total_steps: int
    steps: list[int] = field(default_factory=list)
    stats: dict[str, list[float]] = field(default_factory=dict)

    def last(self, stat: str) -> float:
        values = self.stats.get(stat) or [math.nan]
        return values[-1]


STAT_NAMES = ("min", "mean", "std", "max", "l2")


@dataclass
class StatsGroup:
    title: str
    tensors: list[TensorStats]
    total_tensors: int


@dataclass
class TrialFacts:
    """The summary and plotted data of one trial."""

    uri: str
    name: str
    workers: list[str]
    steps_per_mode: dict[str, int]
    first_step: int | None
    last_step: int | None
    ended: bool
    collections: dict[str, int]
    tensor_count: int
    losses: list[Curve] = field(default_factory=list)
    gradients: Heatmap | None = None
    weights: StatsGroup | None = None
    activations: StatsGroup | None = None


def mode_names(trial: Any) -> list[tuple[str, ModeKeys]]:
    """The trial's modes by name; GLOBAL alone when nothing was saved under a mode."""
    modes = list(trial.modes())
    if not modes:
        return [("GLOBAL", ModeKeys.GLOBAL)]
    return [(m.name, m) for m in modes]


def in_collections(trial: Any, names: Iterable[str]) -> list[str]:
    """Sorted tensor names of those collections that exist in the trial."""
    existing = trial.collections()
    wanted = [existing[c] for c in names if c in existing]
    if not wanted:
        return []
    return sorted(n for n in trial.tensor_names() if any(c.matches(n) for c in wanted))


def _finite_float(x: Any) -> float:
    try:
        return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        return math.nan


def summarize(trial: Any, uri: str) -> TrialFacts:
    steps = trial.steps()
    collections: dict[str, int] = {}
    names = set(trial.tensor_names())
    for cname, coll in sorted(trial.collections().items()):
        collections[cname] = sum(1 for n in names if coll.matches(n))
    return TrialFacts(
        uri=uri,
        name=str(getattr(trial, "name", uri)),
        workers=list(trial.workers()),
        steps_per_mode={label: len(trial.steps(mode=m)) for label, m in mode_names(trial)},
        first_step=steps[0] if steps else None,
        last_step=steps[-1] if steps else None,
        ended=bool(getattr(trial, "loaded_all_steps", False)),
        collections=collections,
        tensor_count=len(names),
    )


def loss_names(trial: Any) -> list[str]:
    """Tensors of the `losses` collection; by name (`loss` anywhere) when it is absent."""
    names = in_collections(trial, ["losses"])
    if names:
        return names
    return [n for n in trial.tensor_names() if re.search("loss", n, re.IGNORECASE)]


def loss_curves(trial: Any) -> list[Curve]:
    curves = []
    for name in loss_names(trial):
        tensor = trial.tensor(name)
        for label, mode in mode_names(trial):
            steps = tensor.steps(mode=mode)
            if not steps:
                continue
            picked = spread(steps, MAX_CURVE_POINTS)
            values = []
            for s in picked:
                try:
                    values.append(_finite_float(tensor.value(s, mode=mode)))
                except SMDebugError:
                    values.append(math.nan)
            curves.append(Curve(name, label, picked, values, len(steps)))
    return curves


def gradient_names(trial: Any) -> list[str]:
    names = in_collections(trial, ["gradients"])
    if names:
        return names
    return [n for n in trial.tensor_names() if n.startswith(("gradient/", "gradients/"))]


def _saved(tensor: Any, step: int, reduction: str) -> bool:
    try:
        return (reduction, False) in tensor.reduction_values(step)
    except (SMDebugError, LookupError):
        return False


def _l2(tensor: Any, step: int) -> float:
    """The saved L2 norm, else one computed from the raw value (NaN when neither is there)."""
    try:
        with np.errstate(all="ignore"):  # a diverged run's norm is Inf: shown, not warned about
            return _finite_float(tensor.reduction_value(step, "l2"))
    except (SMDebugError, TypeError, ValueError):
        return math.nan


def raw_nbytes(tensor: Any, step: int) -> int:
    """About how many bytes reading the raw value costs (float32 assumed; 0: none saved)."""
    try:
        return 4 * math.prod(tensor.shape(step))
    except (SMDebugError, LookupError, TypeError, ValueError):
        return 0


def steps_within(nbytes: int, budget: int, limit: int) -> int:
    """How many steps of values this large fit the budget (at least two: first and last)."""
    return max(2, min(limit, budget // max(1, nbytes)))


def gradient_heatmap(trial: Any) -> Heatmap | None:
    names = gradient_names(trial)
    if not names:
        return None
    layers = names[:MAX_HEATMAP_LAYERS]
    every: set[int] = set()
    column_bytes = 0
    for name in layers:
        steps = trial.tensor(name).steps()
        every.update(steps)
        if steps and not _saved(trial.tensor(name), steps[-1], "l2"):
            column_bytes += raw_nbytes(trial.tensor(name), steps[-1])
    for name in names[MAX_HEATMAP_LAYERS:]:
        every.update(trial.tensor(name).steps())
    all_steps = sorted(every)
    picked = spread(all_steps, steps_within(column_bytes, HEATMAP_BYTES, MAX_HEATMAP_STEPS))
    norms = np.full((len(layers), len(picked)), np.nan)
    for i, name in enumerate(layers):
        tensor = trial.tensor(name)
        saved = set(tensor.steps())
        for j, step in enumerate(picked):
            if step in saved:
                norms[i, j] = _l2(tensor, step)
    return Heatmap(layers, picked, norms, len(names), len(all_steps))


def weight_names(trial: Any) -> list[str]:
    return in_collections(trial, ["weights", "biases"])


def activation_names(trial: Any) -> list[str]:
    """Layer outputs: collections about activations or outputs, losses excepted."""
    wanted = [c for c in trial.collections()
              if "activation" in c or c in ("outputs", "layers", "relu_output")]
    losses = set(loss_names(trial))
    names = in_collections(trial, wanted)
    return [n for n in names if n not in losses and "_input_" not in n]


def _raw_stats(value: np.ndarray) -> dict[str, float] | None:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf" or arr.size == 0:
        return None
    flat = arr.astype(np.float64, copy=False).ravel()
    with np.errstate(all="ignore"):
        return {"min": float(flat.min()), "mean": float(flat.mean()),
                "std": float(flat.std(ddof=1)) if flat.size > 1 else math.nan,
                "max": float(flat.max()), "l2": float(np.sqrt(np.dot(flat, flat)))}


def _saved_stats(tensor: Any, step: int) -> dict[str, float]:
    out = {}
    for stat in STAT_NAMES:
        try:
            out[stat] = _finite_float(tensor.reduction_value(step, stat))
        except (SMDebugError, TypeError, ValueError):
            out[stat] = math.nan
    return out


def tensor_stats(trial: Any, name: str) -> TensorStats:
    tensor = trial.tensor(name)
    steps = tensor.steps()
    ts = TensorStats(name, None, "", len(steps), stats={s: [] for s in STAT_NAMES})
    limit = steps_within(raw_nbytes(tensor, steps[-1]), STAT_BYTES, MAX_STAT_STEPS) if steps else 0
    for step in spread(steps, limit) if steps else ():
        try:
            value = tensor.value(step)
        except SMDebugError:  # only reductions were saved
            stats = _saved_stats(tensor, step)
        else:
            ts.shape, ts.dtype = tuple(np.shape(value)), str(np.asarray(value).dtype)
            stats = _raw_stats(value) or dict.fromkeys(STAT_NAMES, math.nan)
        ts.steps.append(step)
        for key in STAT_NAMES:
            ts.stats[key].append(stats[key])
    return ts


def stats_group(trial: Any, title: str, names: list[str]) -> StatsGroup | None:
    if not names:
        return None
    return StatsGroup(title, [tensor_stats(trial, n) for n in names[:MAX_STAT_TENSORS]],
                      len(names))


def gather(trial: Any, uri: str, progress: Progress | None = None) -> TrialFacts:
    """Everything but the NaN/Inf search and the rules, each section within its budget."""
    say = progress or (lambda _msg: None)
    say("summary")
    facts = summarize(trial, uri)
    say("losses")
    facts.losses = loss_curves(trial)
    say("gradient norms")
    facts.gradients = gradient_heatmap(trial)
    say("weights")
    facts.weights = stats_group(trial, "Weights", weight_names(trial))
    say("activations")
    facts.activations = stats_group(trial, "Activations", activation_names(trial))
    return facts
