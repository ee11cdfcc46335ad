"""A trial as one long-format table (see `columns`): rows built a window of steps at a time,
as a pandas DataFrame or an Arrow table.

Works on any object with the Trial/Tensor query API (duck-typed), and imports neither the
trials nor the export package: `Trial.to_pandas`/`to_arrow` use it from below, and
`smdebug_lite.export` writes it to files from above. Keywords are those of `Selection.of`:
``tensors``, ``collection``, ``regex``, ``mode``, ``start_step``, ``end_step`` (global steps,
end exclusive), ``include_values``, ``window_steps``.
"""

from __future__ import annotations

from typing import Any

from smdebug_lite.table import arrow, frame
from smdebug_lite.table.columns import COLUMNS, RAW, VALUES_COLUMN
from smdebug_lite.table.optional import MissingOptionalDependency
from smdebug_lite.table.rows import Progress
from smdebug_lite.table.selection import Selection


def to_pandas(trial: Any, progress: Progress | None = None, **selection: Any) -> Any:
    """The trial's rows as a pandas DataFrame (the 'export' extra: pandas)."""
    return frame.to_pandas(trial, Selection.of(**selection), progress)


def to_arrow(trial: Any, progress: Progress | None = None, **selection: Any) -> Any:
    """The trial's rows as a pyarrow Table (the 'export' extra: pyarrow)."""
    return arrow.to_arrow(trial, Selection.of(**selection), progress)


__all__ = ["COLUMNS", "RAW", "VALUES_COLUMN", "MissingOptionalDependency", "Progress",
           "Selection", "to_arrow", "to_pandas"]
