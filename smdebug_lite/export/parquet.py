"""The table as a Hive-partitioned Parquet dataset, written window by window."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from smdebug_lite.table.arrow import record_batches, schema
from smdebug_lite.table.optional import require
from smdebug_lite.table.rows import Progress
from smdebug_lite.table.selection import Selection

PARTITION_COLUMNS = ("tensor", "mode")
# Rows a Parquet file buffers before writing a row group: bounds what the writer holds.
ROWS_PER_GROUP = 16384


def dataset_dir(out_dir: str | os.PathLike[str], overwrite: bool, what: str) -> Path:
    """The directory a dataset of partitions goes to, refused when it holds something else."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory; {what} writes a directory "
                              "of partitions")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty; choose a new directory or overwrite")
    return out


def write_parquet(trial: Any, out_dir: str | os.PathLike[str], sel: Selection,
                  progress: Progress | None = None, overwrite: bool = False) -> Path:
    """`out_dir/tensor=<name>/mode=<MODE>/part-<i>.parquet`, written window by window
    (names are percent-encoded in the paths; readers with Hive partitioning decode them)."""
    require("pyarrow.dataset", "export", "Parquet export")  # before anything is touched
    out = dataset_dir(out_dir, overwrite, "Parquet export")
    write_partitioned(record_batches(trial, sel, progress), out, schema(sel.include_values),
                      PARTITION_COLUMNS, overwrite)
    return out


def write_partitioned(batches: Iterable[Any], out: Path, sch: Any, columns: Sequence[str],
                      overwrite: bool) -> None:
    """Record batches as a Hive-partitioned Parquet dataset under `out` (by `columns`)."""
    pa = require("pyarrow", "export", "Arrow/Parquet export")
    ds = require("pyarrow.dataset", "export", "Parquet export")
    ds.write_dataset(
        batches, str(out), schema=sch, format="parquet",
        partitioning=ds.partitioning(pa.schema([sch.field(c) for c in columns]), flavor="hive"),
        basename_template="part-{i}.parquet",
        existing_data_behavior="delete_matching" if overwrite else "overwrite_or_ignore",
        max_partitions=1 << 20,
        max_rows_per_group=ROWS_PER_GROUP,
    )
