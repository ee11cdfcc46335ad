"""A one-line chart of a series, for terminals."""

from __future__ import annotations

import math
from collections.abc import Sequence

_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int = 60) -> str:
    """Bars scaled between the series' min and max (non-finite values as spaces); a long
    series is averaged down to `width` buckets."""
    vals = [v if v is not None and math.isfinite(v) else None for v in values]
    if len(vals) > width:
        buckets = []
        for i in range(width):
            chunk = [v for v in vals[i * len(vals) // width:(i + 1) * len(vals) // width]
                     if v is not None]
            buckets.append(sum(chunk) / len(chunk) if chunk else None)
        vals = buckets
    finite = [v for v in vals if v is not None]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = hi - lo
    top = len(_BARS) - 1
    return "".join(
        " " if v is None else _BARS[0 if span == 0 else round((v - lo) / span * top)] for v in vals
    )
