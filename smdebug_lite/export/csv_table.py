"""The table as one CSV file, written window by window (no optional dependency)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from smdebug_lite.table.columns import VALUES_COLUMN, column_names
from smdebug_lite.table.rows import Progress, iter_batches
from smdebug_lite.table.selection import Selection


def _cell(column: str, v: Any) -> Any:
    if v is None:
        return ""
    if column == VALUES_COLUMN:
        return json.dumps(v)  # a list, as JSON, so it survives the round trip
    if column == "value":
        return repr(v)  # shortest text that reads back as the same float64
    return v


def write_csv(trial: Any, out_path: str | os.PathLike[str], sel: Selection,
              progress: Progress | None = None, overwrite: bool = False) -> Path:
    out = Path(out_path)
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a directory; CSV export writes one file")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; choose another path or overwrite")
    cols = column_names(sel.include_values)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(cols)
        for batch in iter_batches(trial, sel, progress):
            columns = [[_cell(c, v) for v in batch[c]] for c in cols]
            writer.writerows(zip(*columns, strict=True))
    os.replace(tmp, out)
    return out
