"""Reader side of the index: incremental listing and parsing of index files."""

from smdebug_lite.index.reader import (
    Entry,
    IndexReader,
    RangeSteps,
    StepIndex,
    bulk_load,
    entry_shape,
    gc_paused,
    parse_step_index,
    shape_tuple,
    step_in_range,
)

__all__ = [
    "Entry",
    "IndexReader",
    "RangeSteps",
    "StepIndex",
    "bulk_load",
    "entry_shape",
    "gc_paused",
    "parse_step_index",
    "shape_tuple",
    "step_in_range",
]
