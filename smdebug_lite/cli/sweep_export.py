"""``smdebug-lite export`` over several trials (a sweep): one Parquet dataset partitioned by
trial, tensor and mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import EXIT_ERROR, fail
from smdebug_lite.cli.trials import check_local_trial


def export_sweep_command(trials: list[str], out: str, format: str,
                         selection_for: Callable[[Any], dict[str, Any]], *, values: bool,
                         window: int, overwrite: bool, json: bool, quiet: bool,
                         timeout: float) -> None:
    """`selection_for(trial)`: the export keywords for one opened trial (the collections and
    tensors asked for are checked in every trial)."""
    from smdebug_lite.distributed import trial_names
    from smdebug_lite.export.sweep import write_sweep
    from smdebug_lite.table.selection import Selection

    if format != "parquet":
        fail(f"--format {format}: several trials are exported as one Parquet dataset; "
             "CSV takes one trial", EXIT_ERROR)
    for t in trials:
        if "://" not in t:
            check_local_trial(t)  # before writing anything, not at its turn
    names = trial_names(trials)

    def selection(trial: Any) -> Selection:
        return Selection.of(include_values=values, window_steps=window, **selection_for(trial))

    with console.step_progress(f"Exporting {len(trials)} trials", quiet or json) as update:
        path = write_sweep(list(zip(names, trials, strict=True)), out, selection,
                           progress=update, overwrite=overwrite, timeout=timeout)
    if json:
        console.print_json({"trials": dict(zip(names, trials, strict=True)), "out": str(path),
                            "format": format})
    else:
        console.out.print(f"Wrote {path} ({format}, {len(trials)} trials partitioned by trial, "
                          "tensor and mode)")
