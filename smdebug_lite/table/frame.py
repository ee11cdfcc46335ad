"""The table as a pandas DataFrame (built without pyarrow, which pandas does not need)."""

from __future__ import annotations

from typing import Any

from smdebug_lite.table.columns import column_names
from smdebug_lite.table.optional import require
from smdebug_lite.table.rows import Progress, iter_batches
from smdebug_lite.table.selection import Selection

_DTYPES = {"mode_step": "int64", "step": "int64", "value": "float64"}


def to_pandas(trial: Any, sel: Selection, progress: Progress | None = None) -> Any:
    pd = require("pandas", "export", "DataFrame export")
    cols = column_names(sel.include_values)
    data: dict[str, list[Any]] = {c: [] for c in cols}
    for batch in iter_batches(trial, sel, progress):
        for c in cols:
            data[c].extend(batch[c])
    frame = pd.DataFrame(data, columns=list(cols))
    return frame.astype({c: t for c, t in _DTYPES.items()})
