"""The table as Arrow record batches and as an Arrow table (pyarrow: the 'export' extra)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smdebug_lite.table.columns import VALUES_COLUMN
from smdebug_lite.table.optional import require
from smdebug_lite.table.rows import Progress, iter_batches
from smdebug_lite.table.selection import Selection


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
