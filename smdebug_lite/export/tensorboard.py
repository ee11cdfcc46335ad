"""A saved trial as TensorBoard event files, through the hooks' own TensorBoard writer.

Summaries are what a hook with ``export_tensorboard`` writes: one-element tensors as scalars
tagged with the tensor name, larger numeric arrays as histograms tagged
``<collection>/<tensor>``, at the global step, in one folder per mode. Tensors saved only as
reductions are written as scalars tagged ``<tensor>/<reduction>``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from smdebug_lite.table.columns import RAW
from smdebug_lite.table.rows import Progress, iter_batches
from smdebug_lite.table.selection import Selection
from smdebug_lite.writer.tensorboard import TensorBoardWriter

TB_WINDOW_STEPS = 100


def write_tensorboard(trial: Any, out_dir: str | os.PathLike[str], sel: Selection,
                      progress: Progress | None = None) -> Path:
    out = Path(out_dir)
    tb = TensorBoardWriter(str(out))
    # Each step of a window keeps its file open until the window is written: keep it short.
    sel = Selection(**{**sel.__dict__, "include_values": True,
                       "window_steps": min(sel.window_steps, TB_WINDOW_STEPS)})
    try:
        for batch in iter_batches(trial, sel, progress):
            rows = zip(batch["tensor"], batch["collection"], batch["mode"], batch["step"],
                       batch["reduction"], batch["value"], batch["values"], strict=True)
            for tensor, coll, mode, step, red, value, values in rows:
                if value is not None:
                    tag = tensor if red == RAW else f"{tensor}/{red}"
                    tb.add_scalar(tag, value, step, mode)
                elif values:
                    tb.add_histogram(f"{coll}/{tensor}" if coll else tensor,
                                     np.asarray(values), step, mode)
            tb.flush_step()
    finally:
        tb.close()
    return out
