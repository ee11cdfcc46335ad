"""Reader side of the index: incremental listing and parsing of index files, and the
compacted index (manifest) that lets a long trial open in O(chunks) requests."""

from smdebug_lite.format.inline_value import INLINE_KEY, inline_value
from smdebug_lite.format.manifest import ManifestInvalid
from smdebug_lite.format.step_index import (
    Entry,
    StepIndex,
    entry_shape,
    parse_step_index,
    shape_tuple,
)
from smdebug_lite.index.reader import (
    IndexReader,
    RangeSteps,
    bulk_load,
    gc_paused,
    step_in_range,
)

__all__ = [
    "INLINE_KEY",
    "ManifestInvalid",
    "inline_value",
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
