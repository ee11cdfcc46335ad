"""``smdebug-lite ls TRIAL``: the tensors of a trial."""

from __future__ import annotations

from typing import Any

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import handled
from smdebug_lite.cli.options import (
    DEFAULT_TIMEOUT,
    Collection,
    Json,
    Mode,
    Quiet,
    Regex,
    Timeout,
    Trial,
)
from smdebug_lite.cli.trials import check_collection, open_trial, parse_mode_option
from smdebug_lite.table.columns import reduction_label


def tensor_row(trial: Any, name: str, mode: Any) -> dict[str, Any]:
    """Shape, dtype and reductions as of the tensor's last saved step."""
    from smdebug_lite.exceptions import SMDebugError
    from smdebug_lite.modes import ModeKeys

    mode = mode or ModeKeys.GLOBAL
    t = trial.tensor(name)
    steps = t.steps(mode=mode)
    row: dict[str, Any] = {"tensor": name, "steps": len(steps),
                           "first_step": steps[0] if steps else None,
                           "last_step": steps[-1] if steps else None,
                           "shape": None, "dtype": None, "reductions": []}
    if not steps:
        return row
    last = steps[-1]
    try:
        row["shape"] = list(t.shape(last, mode=mode))
        row["dtype"] = t.dtype(last, mode=mode)
    except SMDebugError:
        pass  # saved as reductions only
    row["reductions"] = sorted(reduction_label(r, a) for r, a in t.reduction_values(last, mode=mode))
    return row


def ls(trial: Trial, collection: Collection = None, regex: Regex = None, mode: Mode = None,
       json: Json = False, quiet: Quiet = False, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """Tensors with shape, dtype, steps saved and reductions available.

    Examples:

        smdebug-lite ls ./my-trial

        smdebug-lite ls ./my-trial --collection gradients

        smdebug-lite ls ./my-trial --regex 'fc1' --mode EVAL --json
    """
    from smdebug_lite.modes import ModeKeys

    with handled():
        tr = open_trial(trial, timeout, quiet or json)
        m = parse_mode_option(mode)
        if collection is not None:
            check_collection(tr, collection)
        names = tr.tensor_names(mode=m or ModeKeys.GLOBAL, collection=collection)
        if regex is not None:
            names = tr.tensor_names(mode=m or ModeKeys.GLOBAL, regex=regex) if collection is None \
                else sorted(set(names) & set(tr.tensor_names(regex=regex)))
        rows = [tensor_row(tr, n, m) for n in names]
    if json:
        console.print_json(rows)
        return
    console.table(f"{len(rows)} tensors in {trial}",
                  ["tensor", "shape", "dtype", "steps", "first", "last", "reductions"],
                  [[r["tensor"], "" if r["shape"] is None else tuple(r["shape"]), r["dtype"],
                    r["steps"], r["first_step"], r["last_step"], ", ".join(r["reductions"])]
                   for r in rows])
