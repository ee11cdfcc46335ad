"""Many trials as one table: a Hive-partitioned Parquet dataset
``out/trial=<name>/tensor=<name>/mode=<MODE>/part-<i>.parquet`` that DuckDB, Polars, Spark or
pyarrow read as one table, with `trial` a column like any other.

Trials are read one after the other, and one window of steps at a time, through the same rows
as a single-trial export; a trial given by URI is opened only when its turn comes, so the
memory needed is that of one trial's index. A trial's name is the shortest trailing part of its
path that tells it from the others (`smdebug_lite.distributed.trial_names`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from smdebug_lite.distributed.trial_set import expand_trials, trial_names
from smdebug_lite.export.parquet import PARTITION_COLUMNS, dataset_dir, write_partitioned
from smdebug_lite.table.arrow import record_batches, schema
from smdebug_lite.table.optional import require
from smdebug_lite.table.selection import Selection

SWEEP_PARTITION_COLUMNS = ("trial", *PARTITION_COLUMNS)
# (trials done, trials in all): a sweep's progress is counted in trials.
SweepProgress = Callable[[int, int], None]
TrialLike = Any  # a Trial, or its path / s3:// URI


def _is_uri(t: TrialLike) -> bool:
    return isinstance(t, (str, os.PathLike))


def sweep_members(trials: Iterable[TrialLike]) -> list[tuple[str, TrialLike]]:
    """(name, trial or URI) for each trial; URIs that are prefixes of trials are expanded."""
    items: list[TrialLike] = []
    for t in trials:
        items.extend(expand_trials([os.fspath(t)]) if _is_uri(t) else [t])
    if not items:
        raise ValueError("no trials given to export")
    names = trial_names([t if isinstance(t, str) else str(t.path) for t in items])
    return list(zip(names, items, strict=True))


def _renamed(batch: Any, name: str) -> Any:
    """The batch with its `trial` column set to the trial's name in the sweep."""
    pa = require("pyarrow", "export", "Parquet export")
    i = batch.schema.get_field_index("trial")
    columns = list(batch.columns)
    columns[i] = pa.array([name] * batch.num_rows, type=pa.string())
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


SelectionFor = Callable[[Any], Selection]  # the selection for an opened trial


def _batches(members: list[tuple[str, TrialLike]], selection: Selection | SelectionFor,
             timeout: float | None, progress: SweepProgress | None) -> Iterator[Any]:
    from smdebug_lite.trials import create_trial

    total = len(members)
    if progress is not None:
        progress(0, total)
    for done, (name, trial) in enumerate(members, start=1):
        if _is_uri(trial):
            trial = create_trial(os.fspath(trial), name=name, timeout=timeout)
        sel = selection if isinstance(selection, Selection) else selection(trial)
        for batch in record_batches(trial, sel):
            yield _renamed(batch, name)
        if progress is not None:
            progress(done, total)


def write_sweep(members: Iterable[tuple[str, TrialLike]], out: str | os.PathLike[str],
                selection: Selection | SelectionFor, progress: SweepProgress | None = None,
                overwrite: bool = False, timeout: float | None = None) -> Path:
    """The dataset for (name, trial or URI) pairs; `selection` is one for every trial, or a
    function giving each opened trial its own (all must agree on `include_values`: one table
    has one schema)."""
    require("pyarrow.dataset", "export", "Parquet export")  # before anything is touched
    members = list(members)
    if not members:
        raise ValueError("no trials given to export")
    seen: set[str] = set()
    for name, _t in members:
        if name in seen:
            raise ValueError(f"trial name {name!r} is given to more than one trial of the sweep")
        seen.add(name)
    dest = dataset_dir(out, overwrite, "a sweep export")
    batches = _batches(members, selection, timeout, progress)
    # The schema depends on the selection (a values column or not): taken from the first batch.
    first = next(batches, None)
    if first is None:
        include_values = selection.include_values if isinstance(selection, Selection) else False
        sch = schema(include_values)
        data: Iterable[Any] = iter(())
    else:
        sch = first.schema
        data = itertools.chain([first], batches)
    write_partitioned(data, dest, sch, SWEEP_PARTITION_COLUMNS, overwrite)
    dest.mkdir(parents=True, exist_ok=True)  # an empty selection still leaves a dataset
    return dest


def export_sweep(trials: Iterable[TrialLike], out: str | os.PathLike[str],
                 progress: SweepProgress | None = None, overwrite: bool = False,
                 timeout: float | None = None, **selection: Any) -> Path:
    """Export trials (Trial objects, paths, ``s3://`` URIs, or prefixes holding trials) into
    one dataset partitioned by trial, tensor and mode; `selection` keywords as for
    `export_trial` apply to every trial."""
    return write_sweep(sweep_members(trials), out, Selection.of(**selection), progress,
                       overwrite, timeout)
