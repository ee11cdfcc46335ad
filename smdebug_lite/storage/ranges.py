"""Byte ranges of one file merged into fewer reads.

A read costs far more than the bytes it carries when they are few (a system call locally, a
whole HTTP request on S3), so ranges of the same file that touch, or lie at most `max_gap`
bytes apart, are fetched as one and sliced afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, islice, repeat
from operator import add, le

Span = tuple[int, int]  # (start, end), end exclusive


def coalesce(starts: Sequence[int], lengths: Sequence[int], max_gap: int = 0) -> list[Span]:
    """Sorted, merged (start, end) spans covering every range; spans closer than `max_gap`
    bytes are joined."""
    if len(starts) > 1 and len(starts) == len(lengths):
        # The usual case, ranges in order and close together, checked with loops in C.
        ends = list(map(add, starts, lengths))
        if all(map(le, starts, islice(starts, 1, None))):
            reach = list(accumulate(ends, max))  # the end of everything before each range
            if all(map(le, islice(starts, 1, None), map(add, reach, repeat(max_gap)))):
                return [(starts[0], reach[-1])]
    spans = sorted(zip(starts, lengths, strict=True))
    out: list[list[int]] = []
    for start, length in spans:
        end = start + length
        if out and start - out[-1][1] <= max_gap:
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def slice_ranges(spans: Sequence[Span], datas: Sequence[bytes], starts: Sequence[int],
                 lengths: Sequence[int]) -> list[bytes]:
    """Each range's bytes out of the spans read (short where a span came back short)."""
    out = []
    j = 0
    for start, length in zip(starts, lengths, strict=True):
        if not (spans[j][0] <= start < spans[j][1] or start == spans[j][0]):
            j = _find(spans, start)
        lo = start - spans[j][0]
        data = datas[j]
        out.append(data if lo == 0 and len(data) == length else data[lo : lo + length])
    return out


def _find(spans: Sequence[Span], start: int) -> int:
    lo, hi = 0, len(spans) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if spans[mid][0] <= start:
            lo = mid
        else:
            hi = mid - 1
    return lo
