"""The table as Arrow record batches, an Arrow table, and a Hive-partitioned Parquet dataset."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from smdebug_lite.export.columns import VALUES_COLUMN
from smdebug_lite.export.optional import require
from smdebug_lite.export.rows import Progress, iter_batches
from smdebug_lite.export.selection import Selection

PARTITION_COLUMNS = ("tensor", "mode")
# Rows a Parquet file buffers before writing a row group: bounds what the writer holds.
ROWS_PER_GROUP = 16384


def _pa() -> Any:
    return require("pyarrow", "export", "Arrow/Parquet export")


def schema(include_values: bool) -> Any:
    pa = _pa()
    fields = [
        ("trial", pa.string()), ("tensor", pa.string()), ("collection", pa.string()),
        ("mode", pa.string()), ("mode_step", pa.int64()), ("step", pa.int64()),
        ("worker", pa.string()), ("reduction", pa.string()), ("value", pa.float64()),
    ]
    if include_values:
        fields.append((VALUES_COLUMN, pa.list_(pa.float64())))
    return pa.schema(fields)


def record_batches(trial: Any, sel: Selection, progress: Progress | None = None) -> Iterator[Any]:
    pa = _pa()
    sch = schema(sel.include_values)
    for batch in iter_batches(trial, sel, progress):
        yield pa.RecordBatch.from_pydict(batch, schema=sch)


def to_arrow(trial: Any, sel: Selection, progress: Progress | None = None) -> Any:
    pa = _pa()
    return pa.Table.from_batches(list(record_batches(trial, sel, progress)),
                                 schema=schema(sel.include_values))


def write_parquet(trial: Any, out_dir: str | os.PathLike[str], sel: Selection,
                  progress: Progress | None = None, overwrite: bool = False) -> Path:
    """`out_dir/tensor=<name>/mode=<MODE>/part-<i>.parquet`, written window by window
    (names are percent-encoded in the paths; readers with Hive partitioning decode them)."""
    pa = _pa()
    ds = require("pyarrow.dataset", "export", "Parquet export")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory; Parquet export writes a "
                              "directory of partitions")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} is not empty; choose a new directory or overwrite")
    sch = schema(sel.include_values)
    ds.write_dataset(
        record_batches(trial, sel, progress), str(out), schema=sch, format="parquet",
        partitioning=ds.partitioning(
            pa.schema([sch.field(c) for c in PARTITION_COLUMNS]), flavor="hive"),
        basename_template="part-{i}.parquet",
        existing_data_behavior="delete_matching" if overwrite else "overwrite_or_ignore",
        max_partitions=1 << 20,
        max_rows_per_group=ROWS_PER_GROUP,
    )
    return out
