"""Trials written out: Parquet (Hive-partitioned), CSV and TensorBoard files of the long-format
table (`smdebug_lite.table`), also as pandas and Arrow, and sweeps of many trials (`sweep`).

Every function takes a trial (or a path / ``s3://`` URI, opened with `create_trial`) and the
selection keywords of `Selection.of`: ``tensors``, ``collection``, ``regex``, ``mode``,
``start_step``, ``end_step`` (global steps, end exclusive), ``include_values``,
``window_steps``. See `smdebug_lite.table.columns` for the columns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smdebug_lite import table
from smdebug_lite.table import (
    COLUMNS,
    RAW,
    VALUES_COLUMN,
    MissingOptionalDependency,
    Progress,
    Selection,
)

FORMATS = ("parquet", "csv")


def _trial(trial: Any) -> Any:
    if isinstance(trial, (str, os.PathLike)):
        from smdebug_lite.trials import create_trial

        return create_trial(os.fspath(trial))
    return trial


def to_pandas(trial: Any, progress: Progress | None = None, **selection: Any) -> Any:
    return table.to_pandas(_trial(trial), progress, **selection)


def to_arrow(trial: Any, progress: Progress | None = None, **selection: Any) -> Any:
    return table.to_arrow(_trial(trial), progress, **selection)


def export_trial(trial: Any, out: str | os.PathLike[str], format: str = "parquet",
                 progress: Progress | None = None, overwrite: bool = False,
                 **selection: Any) -> Path:
    """Write the table to `out`: a directory of Parquet partitions, or one CSV file."""
    sel = Selection.of(**selection)
    if format == "parquet":
        from smdebug_lite.export.parquet import write_parquet

        return write_parquet(_trial(trial), out, sel, progress, overwrite)
    if format == "csv":
        from smdebug_lite.export.csv_table import write_csv

        return write_csv(_trial(trial), out, sel, progress, overwrite)
    raise ValueError(f"format={format!r} is not an export format; expected one of {FORMATS}")


def export_tensorboard(trial: Any, out_dir: str | os.PathLike[str],
                       progress: Progress | None = None, **selection: Any) -> Path:
    from smdebug_lite.export.tensorboard import write_tensorboard

    return write_tensorboard(_trial(trial), out_dir, Selection.of(**selection), progress)


__all__ = ["COLUMNS", "FORMATS", "RAW", "VALUES_COLUMN", "MissingOptionalDependency", "Selection",
           "export_tensorboard", "export_trial", "to_arrow", "to_pandas"]
