"""``smdebug-lite export`` and ``smdebug-lite tensorboard``: a trial as files for other tools."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import EXIT_ERROR, fail, handled
from smdebug_lite.cli.options import (
    DEFAULT_TIMEOUT,
    EndStep,
    Json,
    Mode,
    Quiet,
    Regex,
    StartStep,
    Timeout,
    Trial,
)
from smdebug_lite.cli.trials import check_collection, open_trial, parse_mode_option

Collections = Annotated[list[str] | None, typer.Option(
    "--collection", "-c", help="only tensors of this collection (repeatable)")]
Tensors = Annotated[list[str] | None, typer.Option(
    "--tensor", "-t", help="only this tensor (repeatable)")]


def selection(tr: Any, collection: list[str] | None, tensor: list[str] | None,
              regex: str | None, mode: str | None, start_step: int | None,
              end_step: int | None) -> dict[str, Any]:
    """Keywords for the export functions; several collections select the union of their
    tensors (each row then names the tensor's own collection)."""
    from smdebug_lite.cli.trials import check_tensor

    if start_step is not None and end_step is not None and end_step <= start_step:
        fail(f"--end-step {end_step} must be greater than --start-step {start_step}", EXIT_ERROR)
    sel: dict[str, Any] = {"regex": regex, "mode": parse_mode_option(mode),
                           "start_step": start_step, "end_step": end_step}
    for c in collection or ():
        check_collection(tr, c)
    for t in tensor or ():
        check_tensor(tr, t)
    names = set(tensor) if tensor else None
    if collection and len(collection) == 1:
        sel["collection"] = collection[0]
    elif collection:
        in_any = {n for c in collection for n in tr.tensor_names(collection=c)}
        names = in_any if names is None else names & in_any
    sel["tensors"] = None if names is None else sorted(names)
    return sel


def export(trials: Annotated[list[str], typer.Argument(
               metavar="TRIAL...", help="trial directories, s3:// URIs or prefixes of trials")],
           out: Annotated[str, typer.Argument(
               help="output: a directory (parquet) or a file (csv)")],
           format: Annotated[str, typer.Option("--format", "-f", help="parquet or csv")] = "parquet",
           collection: Collections = None, tensor: Tensors = None, regex: Regex = None,
           mode: Mode = None, start_step: StartStep = None, end_step: EndStep = None,
           values: Annotated[bool, typer.Option(
               "--values", help="add a 'values' column with every element of larger arrays")
           ] = False,
           overwrite: Annotated[bool, typer.Option(help="replace existing output")] = False,
           window: Annotated[int, typer.Option(min=1, help="steps read and written at a time")
                             ] = 500,
           json: Json = False, quiet: Quiet = False, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """A long-format table (trial, tensor, collection, mode, mode_step, step, worker,
    reduction, value): Parquet partitioned by tensor and mode (Hive layout), or CSV.

    Examples:

        smdebug-lite export ./my-trial ./my-trial.parquet

        smdebug-lite export ./my-trial losses.csv --format csv --collection losses

        smdebug-lite export s3://bucket/run1 ./run1.parquet --mode TRAIN --start-step 100

    Several trials, or a prefix holding several (a sweep), make one Parquet dataset
    partitioned by trial, then tensor and mode:

        smdebug-lite export s3://bucket/sweep-7/ ./sweep-7.parquet --collection gradients

    Then, e.g.: duckdb -c "SELECT tensor, avg(value) FROM
    read_parquet('my-trial.parquet/**/*.parquet', hive_partitioning=true) GROUP BY tensor"
    """
    from smdebug_lite.export import FORMATS, export_trial

    with handled():
        if format not in FORMATS:
            fail(f"--format {format!r}: expected one of {', '.join(FORMATS)}", EXIT_ERROR)
        from smdebug_lite.distributed import expand_trials

        found = expand_trials(trials)
        if len(trials) > 1 or found != trials:
            from smdebug_lite.cli.sweep_export import export_sweep_command

            export_sweep_command(
                found, out, format,
                lambda t: selection(t, collection, tensor, regex, mode, start_step, end_step),
                values=values, window=window, overwrite=overwrite, json=json, quiet=quiet,
                timeout=timeout)
            return
        trial = found[0]
        tr = open_trial(trial, timeout, quiet or json)
        sel = selection(tr, collection, tensor, regex, mode, start_step, end_step)
        with console.step_progress(f"Exporting {trial}", quiet or json) as update:
            path = export_trial(tr, out, format=format, progress=update, overwrite=overwrite,
                                include_values=values, window_steps=window, **sel)
    if json:
        console.print_json({"trial": trial, "out": str(path), "format": format})
    else:
        console.out.print(f"Wrote {path} ({format})")


def tensorboard(trial: Trial, out: Annotated[str, typer.Argument(
                    help="TensorBoard log directory to write")],
                collection: Collections = None, tensor: Tensors = None, regex: Regex = None,
                mode: Mode = None, start_step: StartStep = None, end_step: EndStep = None,
                quiet: Quiet = False, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """TensorBoard event files, as a hook with export_tensorboard writes them: scalars for
    one-element tensors, histograms for larger ones, one folder per mode.

    Examples:

        smdebug-lite tensorboard ./my-trial ./tb && tensorboard --logdir ./tb

        smdebug-lite tensorboard ./my-trial ./tb --collection losses
    """
    from smdebug_lite.export import export_tensorboard

    with handled():
        tr = open_trial(trial, timeout, quiet)
        sel = selection(tr, collection, tensor, regex, mode, start_step, end_step)
        with console.step_progress(f"Writing TensorBoard files for {trial}", quiet) as update:
            path = export_tensorboard(tr, out, progress=update, **sel)
    console.out.print(f"Wrote TensorBoard files under {path}")
