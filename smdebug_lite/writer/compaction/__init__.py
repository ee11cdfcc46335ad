"""The index compaction the writer does: the per-step index files packed into a manifest.

The chief worker's writer extends the manifest while training runs (`rolling.py`, called by
`StepFileWriter` after each step and as it finishes) and its hook's close compacts what is left
(`compact.compact_at_close`). `compact_trial` writes or extends the manifest of any existing
trial (`smdebug-lite compact`). The manifest's document is `format/manifest.py`, which a trial
reads through `smdebug_lite.index`.
"""

from smdebug_lite.writer.compaction.compact import (
    CompactionResult,
    compact_at_close,
    compact_trial,
)

__all__ = ["CompactionResult", "compact_at_close", "compact_trial"]
