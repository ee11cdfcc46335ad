"""Which steps a report looks at: every step of a short trial, an even spread of a long one.

A report must stay quick on a 100k-step trial, so every section reads at most a fixed number
of steps; the first and last saved steps are always among them.
"""

from __future__ import annotations

from collections.abc import Sequence


def spread(steps: Sequence[int], limit: int) -> list[int]:
    """At most `limit` of `steps` (sorted), evenly spaced, keeping the first and the last."""
    if limit < 1:
        raise ValueError(f"limit={limit!r} must be at least 1")
    n = len(steps)
    if n <= limit:
        return list(steps)
    if limit == 1:
        return [steps[-1]]
    picked = {round(i * (n - 1) / (limit - 1)) for i in range(limit)}
    return [steps[i] for i in sorted(picked)]
