"""Where the first NaN or Inf appeared: tensor, step and worker.

Steps are searched in order. Per tensor, the cheapest evidence that was saved is used:
the ``num_nan``/``num_inf`` reductions (an smdebug-lite extension) when present, else saved
``min``/``max`` reductions (NaN or +-Inf there means the tensor held one), else the raw values,
read within a budget of reads and bytes so a long trial of large tensors stays bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smdebug_lite.exceptions import SMDebugError
from smdebug_lite.report.gather import Progress

MAX_READS = 5000
MAX_BYTES = 512 * 1024 * 1024
MAX_FINDINGS = 10  # offending tensors listed at the first step

COUNTS = "num_nan/num_inf reductions"
MINMAX = "saved min/max reductions"
RAW = "raw values"


@dataclass
class Finding:
    tensor: str
    step: int
    mode: str
    mode_step: int | None
    worker: str
    nan: int | None  # None: the source tells there were some, not how many
    inf: int | None
    source: str


@dataclass
class NonFiniteSearch:
    """The outcome: findings at the first offending step, or how far the search got."""

    findings: list[Finding] = field(default_factory=list)
    steps_searched: int = 0
    total_steps: int = 0
    complete: bool = True  # False: the budget ran out before the last step
    sources: set[str] = field(default_factory=set)


def _saved_keys(tensor: Any, step: int, worker: str) -> set[tuple[str, bool]]:
    try:
        return set(tensor.reduction_values(step, worker=worker))
    except (SMDebugError, LookupError):
        return set()


def _choose_source(tensor: Any, step: int, worker: str) -> str:
    keys = _saved_keys(tensor, step, worker)
    if ("num_nan", False) in keys and ("num_inf", False) in keys:
        return COUNTS
    if ("min", False) in keys and ("max", False) in keys:
        try:
            tensor.value(step, worker=worker)
        except (SMDebugError, LookupError):  # reductions only: use them
            return MINMAX
    return RAW


class _Budget:
    def __init__(self, reads: int, nbytes: int) -> None:
        self.reads, self.nbytes = reads, nbytes

    def spend(self, nbytes: int) -> None:
        self.reads -= 1
        self.nbytes -= nbytes

    @property
    def left(self) -> bool:
        return self.reads > 0 and self.nbytes > 0


def _count(tensor: Any, step: int, worker: str, source: str, budget: _Budget
           ) -> tuple[int | None, int | None] | None:
    """(nan, inf) counts at the step, None when the tensor is clean (or has no floats)."""
    if source == COUNTS:
        nan = int(np.asarray(tensor.reduction_value(step, "num_nan", worker=worker)).sum())
        inf = int(np.asarray(tensor.reduction_value(step, "num_inf", worker=worker)).sum())
        budget.spend(0)
        return (nan, inf) if nan or inf else None
    if source == MINMAX:
        lo = float(np.asarray(tensor.reduction_value(step, "min", worker=worker)).ravel()[0])
        hi = float(np.asarray(tensor.reduction_value(step, "max", worker=worker)).ravel()[0])
        budget.spend(0)
        has_nan = math.isnan(lo) or math.isnan(hi)
        has_inf = math.isinf(lo) or math.isinf(hi)
        if not (has_nan or has_inf):
            return None
        return (None if has_nan else 0, None if has_inf else 0)
    arr = np.asarray(tensor.value(step, worker=worker))
    budget.spend(arr.nbytes)
    if arr.dtype.kind not in "fc":
        return None
    nan = int(np.count_nonzero(np.isnan(arr)))
    inf = int(np.count_nonzero(np.isinf(arr)))
    return (nan, inf) if nan or inf else None


def first_nonfinite(trial: Any, progress: Progress | None = None, *,
                    max_reads: int = MAX_READS, max_bytes: int = MAX_BYTES) -> NonFiniteSearch:
    """Search the steps in order; stop at the first step where any tensor held NaN or Inf."""
    steps = trial.steps()
    result = NonFiniteSearch(total_steps=len(steps))
    budget = _Budget(max_reads, max_bytes)
    sources: dict[str, str] = {}
    for index, step in enumerate(steps):
        if not budget.left:
            result.complete = False
            break
        if progress is not None and index % 100 == 0:
            progress(f"NaN/Inf search: step {step} ({index}/{len(steps)})")
        for name in trial.tensor_names(step=step):
            tensor = trial.tensor(name)
            try:
                workers = tensor.workers(step)
            except SMDebugError:
                continue
            for worker in workers:
                try:
                    source = sources.get(name) or _choose_source(tensor, step, worker)
                    sources[name] = source
                    counts = _count(tensor, step, worker, source, budget)
                except (SMDebugError, LookupError, TypeError, ValueError):
                    continue
                result.sources.add(source)
                if counts is not None and len(result.findings) < MAX_FINDINGS:
                    mode, mode_step = trial.mode_modestep(step)
                    result.findings.append(Finding(
                        name, step, mode.name if mode is not None else "GLOBAL", mode_step,
                        worker, counts[0], counts[1], source))
        result.steps_searched = index + 1
        if result.findings:
            break
    return result
