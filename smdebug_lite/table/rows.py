"""Rows of the long-format table, produced one window of steps at a time.

Only one window's rows are held at once, so exporting a long trial needs memory for a window,
not for the trial's values (the trial's index is in memory anyway, as for any Trial query).
Values are read through the public Trial/Tensor API, so every check and error of a query
applies to an export too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from smdebug_lite.exceptions import SMDebugValueError, TensorUnavailableForStep
from smdebug_lite.modes import ModeKeys
from smdebug_lite.table.columns import RAW, VALUES_COLUMN, column_names, primary_collection
from smdebug_lite.table.columns import reduction_label as _label
from smdebug_lite.table.selection import Selection

Batch = dict[str, list[Any]]
Progress = Callable[[int, int], None]  # (steps done, steps in all)


def selected_tensors(trial: Any, sel: Selection) -> list[str]:
    """Names chosen by the selection; an unknown name given explicitly raises TensorUnavailable."""
    if sel.tensors is not None:
        for name in sel.tensors:
            trial.tensor(name)  # raises TensorUnavailable naming it
        names = sorted(set(sel.tensors))
    else:
        names = trial.tensor_names(mode=sel.mode or ModeKeys.GLOBAL)
    if sel.collection is not None:
        coll = trial.collection(sel.collection)
        names = [n for n in names if coll.matches(n)]
    if sel.regex is not None:
        try:
            pattern = re.compile(sel.regex)
        except re.error as e:
            raise SMDebugValueError(f"regex={sel.regex!r} is not a valid regex: {e}") from None
        names = [n for n in names if pattern.search(n)]
    return names


def selected_steps(trial: Any, sel: Selection) -> list[int]:
    """Global steps in the range (and mode) selected, complete ones only."""
    steps = [s for s in trial.steps() if sel.in_range(s)]
    if sel.mode is not None and sel.mode is not ModeKeys.GLOBAL:
        steps = [s for s in steps if trial.mode(s) is sel.mode]
    return steps


def _scalar(arr: Any) -> float | None:
    if arr.__class__ is not np.ndarray:
        arr = np.asarray(arr)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        return None
    return float(arr.reshape(-1)[0])


def _elements(arr: Any) -> list[float] | None:
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biuf":
        return None
    return np.asarray(arr, dtype=np.float64).reshape(-1).tolist()


class _TensorRows:
    """One tensor's rows over a window of steps."""

    def __init__(self, trial: Any, name: str, collection: str, sel: Selection,
                 multi_worker: bool, only_worker: str) -> None:
        self.tensor = trial.tensor(name)
        self.name = name
        self.collection = collection
        self.include_values = sel.include_values
        self.multi_worker = multi_worker
        self.only_worker = only_worker
        steps = self.tensor.steps()
        self.steps = [s for s in steps if sel.in_range(s)]

    def add(self, out: Batch, trial_name: str, lo: int, hi: int,
            modes: dict[int, tuple[str, int]]) -> None:
        t = self.tensor
        steps = self.steps
        i, j = bisect.bisect_left(steps, lo), bisect.bisect_left(steps, hi)
        # Column values gathered per tensor, then appended to the window's columns at once.
        mode_col: list[str] = []
        mode_step_col: list[int] = []
        step_col: list[int] = []
        worker_col: list[str] = []
        red_col: list[str] = []
        arrays: list[Any] = []
        for gs in steps[i:j]:
            where = modes.get(gs)
            if where is None:
                continue  # another mode than the one selected
            mode, mode_step = where
            workers = t.workers(gs) if self.multi_worker else (None,)
            for w in workers:
                worker = w if w is not None else self.only_worker
                found: list[tuple[str, Any]] = []
                try:
                    found.append((RAW, t.value(gs, worker=w)))
                except TensorUnavailableForStep:
                    pass  # reductions only
                for (red, abs_), value in t.reduction_values(gs, worker=w).items():
                    found.append((_label(red, abs_), value))
                for label, arr in found:
                    mode_col.append(mode)
                    mode_step_col.append(mode_step)
                    step_col.append(gs)
                    worker_col.append(worker)
                    red_col.append(label)
                    arrays.append(arr)
        n = len(arrays)
        if not n:
            return
        out["trial"] += [trial_name] * n
        out["tensor"] += [self.name] * n
        out["collection"] += [self.collection] * n
        out["mode"] += mode_col
        out["mode_step"] += mode_step_col
        out["step"] += step_col
        out["worker"] += worker_col
        out["reduction"] += red_col
        scalars = [_scalar(a) for a in arrays]
        out["value"] += scalars
        if self.include_values:
            out[VALUES_COLUMN] += [_elements(a) if v is None else [v]
                                   for a, v in zip(arrays, scalars, strict=True)]


def iter_batches(trial: Any, sel: Selection, progress: Progress | None = None) -> Iterator[Batch]:
    """{column: list} per window of `sel.window_steps` global steps (empty windows skipped)."""
    names = selected_tensors(trial, sel)
    steps = selected_steps(trial, sel)
    workers = trial.workers()
    multi = len(workers) > 1
    only_worker = workers[0] if workers else ""
    colls = list(trial.collections().values())
    tensors = [
        _TensorRows(trial, n, sel.collection or primary_collection(n, colls), sel, multi,
                    only_worker)
        for n in names
    ]
    cols = column_names(sel.include_values)
    total = len(steps)
    if progress is not None:
        progress(0, total)
    for k in range(0, total, sel.window_steps):
        window = steps[k:k + sel.window_steps]
        modes = {}
        for gs in window:
            mode, mode_step = trial.mode_modestep(gs)
            modes[gs] = (mode.name, mode_step)
        out: Batch = {c: [] for c in cols}
        for tr in tensors:
            tr.add(out, trial.name, window[0], window[-1] + 1, modes)
        if progress is not None:
            progress(k + len(window), total)
        if out["step"]:
            yield out
