"""The long-format table every export produces: one row per (tensor, step, worker, reduction).

`step` is the global step, `mode_step` the step within `mode`; `reduction` is ``raw`` for a saved
value, else the saved reduction's name (``abs_`` prefixed for reductions of absolute values).
`value` holds scalars (any saved array of one element) as float64 and is null for larger arrays,
whose elements can be asked for as a float64 list in the optional `values` column.
"""

from __future__ import annotations

from collections.abc import Iterable

COLUMNS = ("trial", "tensor", "collection", "mode", "mode_step", "step", "worker", "reduction",
           "value")
VALUES_COLUMN = "values"
RAW = "raw"
# Collections every tensor of a framework belongs to: a tensor's own group says more.
CATCH_ALL_COLLECTIONS = frozenset({"all", "default"})


def reduction_label(name: str, abs_: bool) -> str:
    return f"abs_{name}" if abs_ else name


def column_names(include_values: bool) -> tuple[str, ...]:
    return (*COLUMNS, VALUES_COLUMN) if include_values else COLUMNS


def primary_collection(tensor: str, collections: Iterable[object]) -> str:
    """The first (by name) collection holding `tensor` that is not a catch-all, else a
    catch-all one, else ""; a tensor is in one row group, so one name is shown."""
    found = sorted(c.name for c in collections if c.matches(tensor))  # type: ignore[attr-defined]
    specific = [n for n in found if n not in CATCH_ALL_COLLECTIONS]
    return (specific or found or [""])[0]
