"""``smdebug-lite show TRIAL TENSOR``: a tensor's values or reductions over steps."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import typer

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import handled
from smdebug_lite.cli.options import DEFAULT_TIMEOUT, Json, Mode, Quiet, Timeout, Trial
from smdebug_lite.cli.sparkline import sparkline
from smdebug_lite.cli.trials import check_tensor, missing_step, open_trial, parse_mode_option
from smdebug_lite.table.columns import reduction_label

ARRAY_SUMMARY = ("min", "mean", "max")  # shown over steps for tensors larger than a scalar


def _scalar(arr: Any) -> float | None:
    a = np.asarray(arr)
    return float(a.reshape(-1)[0]) if a.size == 1 and a.dtype.kind in "biuf" else None


def _series(t: Any, steps: list[int], mode: Any, reductions: list[str] | None
            ) -> tuple[list[str], list[list[float | None]]]:
    """(column names, rows) over the steps: the value for scalars, else reductions (saved
    ones when there is no raw value, else computed from it)."""
    from smdebug_lite.exceptions import TensorUnavailableForStep

    rows: list[list[float | None]] = []
    columns: list[str] | None = list(reductions) if reductions else None
    for s in steps:
        raw = None
        try:
            raw = t.value(s, mode=mode)
        except TensorUnavailableForStep:
            pass
        if columns is None:
            if raw is not None and _scalar(raw) is not None:
                columns = ["value"]
            elif raw is not None:
                columns = list(ARRAY_SUMMARY)
            else:
                columns = sorted(reduction_label(r, a) for r, a in t.reduction_values(s, mode=mode))
        if columns == ["value"]:
            rows.append([_scalar(raw) if raw is not None else None])
            continue
        row = []
        for c in columns:
            abs_ = c.startswith("abs_")
            name = c[4:] if abs_ else c
            try:
                row.append(_scalar(t.reduction_value(s, name, mode=mode, abs=abs_)))
            except TensorUnavailableForStep:
                row.append(None)
        rows.append(row)
    return columns or ["value"], rows


def _pick(steps: list[int], limit: int) -> list[int]:
    """Up to `limit` steps spread over the series, always with the first and the last."""
    if len(steps) <= limit:
        return list(range(len(steps)))
    return sorted({round(i * (len(steps) - 1) / (limit - 1)) for i in range(limit)})


def show(trial: Trial,
         tensor: Annotated[str, typer.Argument(help="tensor name (see ls)")],
         step: Annotated[int | None, typer.Option("--step", "-s", min=0,
                                                  help="one step: print its value")] = None,
         mode: Mode = None,
         reduction: Annotated[list[str] | None, typer.Option(
             "--reduction", help="reduction column(s) over steps, e.g. l2 or abs_mean")] = None,
         limit: Annotated[int, typer.Option(min=2, help="most rows in the table")] = 30,
         json: Json = False, quiet: Quiet = False, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """A tensor over steps (a table and a sparkline), or its value at one --step.

    Examples:

        smdebug-lite show ./my-trial CrossEntropyLoss_output_0

        smdebug-lite show ./my-trial CrossEntropyLoss_output_0 --mode EVAL --json

        smdebug-lite show ./my-trial gradient/Net_fc1.weight --reduction l2

        smdebug-lite show ./my-trial Net_fc1.bias --step 10
    """
    from smdebug_lite.modes import ModeKeys

    with handled():
        tr = open_trial(trial, timeout, quiet or json)
        m = parse_mode_option(mode) or ModeKeys.GLOBAL
        t = check_tensor(tr, tensor)
        steps = t.steps(mode=m)
        if step is not None:
            if step not in steps:
                missing_step(tr, tensor, step, m, steps)
            _one_step(t, step, m, json)
            return
        columns, rows = _series(t, steps, m, reduction)
    if json:
        console.print_json({"tensor": tensor, "mode": m.name, "columns": columns,
                            "steps": steps, "rows": rows})
        return
    first = [r[0] for r in rows]
    console.out.print(f"[bold]{tensor}[/bold] ({m.name}, {len(steps)} steps) {columns[0]}: "
                      f"{sparkline(first)}")
    shown = _pick(steps, limit)
    console.table(None, ["step", *columns],
                  [[steps[i], *[_fmt(v) for v in rows[i]]] for i in shown])
    if len(shown) < len(steps):
        console.err.print(f"{len(shown)} of {len(steps)} steps shown (--limit); --json for all")


def _fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _one_step(t: Any, step: int, mode: Any, as_json: bool) -> None:
    from smdebug_lite.exceptions import TensorUnavailableForStep

    try:
        value = t.value(step, mode=mode)
    except TensorUnavailableForStep:
        value = None
    reductions = {reduction_label(r, a): _scalar(v)
                  for (r, a), v in t.reduction_values(step, mode=mode).items()}
    if as_json:
        console.print_json({
            "tensor": t.name, "step": step, "mode": mode.name,
            "shape": None if value is None else list(value.shape),
            "dtype": None if value is None else t.dtype(step, mode=mode),
            "value": None if value is None else np.asarray(value).tolist(),
            "reductions": reductions,
        })
        return
    if value is not None:
        console.out.print(f"[bold]{t.name}[/bold] at step {step} ({mode.name}): shape "
                          f"{tuple(value.shape)}, dtype {t.dtype(step, mode=mode)}")
        with np.printoptions(threshold=200, edgeitems=4, precision=6):
            console.out.print(str(np.asarray(value)), markup=False)
    if reductions:
        console.table("saved reductions", ["reduction", "value"],
                      [[k, _fmt(v)] for k, v in sorted(reductions.items())])
