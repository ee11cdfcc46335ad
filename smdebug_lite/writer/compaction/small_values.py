"""The values of small records, read for the manifest a chunk at a time.

Compaction keeps one-element values (scalars, saved reductions) and small raw values in the
manifest. A value already inlined in its index entry is taken from there; for the rest only
the records themselves are read, not the event files around them: per file, the byte spans
holding them (records close together merged into one read), many files in one call
(concurrently on S3, on a few threads locally), a bounded number of bytes at a time.

A value that cannot be read (a missing file, a damaged record or entry, a storage error) is
left out: the trial reads it from its event file as before, and reports the damage then.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smdebug_lite.format.entry_record import decode_entry_record
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.format.step_index import Entry, StepIndex, sound_inline
from smdebug_lite.storage import Storage
from smdebug_lite.storage.ranges import coalesce

# Records of one file at most this far apart are read as one (a local read costs about as
# much as copying 16 KiB; an S3 request, as transferring about a megabyte).
LOCAL_GAP = 16 << 10
REMOTE_GAP = 1 << 20
BATCH_BYTES = 64 << 20  # bytes read per call, at most (a single larger span excepted)

_Span = tuple[str, int, int, list[int]]  # file, start, end, the wanted records it holds


def read_small_values(storage: Storage,
                      wanted: Sequence[tuple[StepIndex, Entry]]) -> list[np.ndarray | None]:
    """The value of each (index file, entry) in `wanted`, None where it cannot be read. Values
    read from records are copies: they outlive the bytes read."""
    out: list[np.ndarray | None] = [None] * len(wanted)
    by_file: dict[str, list[int]] = {}
    for i, (si, e) in enumerate(wanted):
        if INLINE_KEY in e:
            arr = sound_inline(e)
            if arr is not None:
                out[i] = arr
                continue
        start, length = e.get("start_idx"), e.get("length")
        if si.event_rel is None or start.__class__ is not int or length.__class__ is not int \
                or start < 0 or length <= 0:
            continue  # an entry that cannot locate its record
        by_file.setdefault(si.event_rel, []).append(i)
    gap = LOCAL_GAP if storage.is_local else REMOTE_GAP
    spans = [span for rel, members in by_file.items()
             for span in _spans(rel, members, wanted, gap)]
    for batch in _batches(spans):
        for (_, first, _, members), data in zip(batch, _read(storage, batch), strict=True):
            if data is None:
                continue
            for i in members:
                e = wanted[i][1]
                try:
                    arr = decode_entry_record(data, e["start_idx"] - first, e)
                except Exception:  # noqa: BLE001 - a damaged record is reported when it is read
                    continue
                out[i] = arr.copy()
    return out


def _spans(rel: str, members: list[int], wanted: Sequence[tuple[StepIndex, Entry]],
           gap: int) -> list[_Span]:
    """The reads of one file: merged spans, each with the records it holds whole."""
    members = sorted(members, key=lambda i: wanted[i][1]["start_idx"])
    starts = [wanted[i][1]["start_idx"] for i in members]
    lengths = [wanted[i][1]["length"] for i in members]
    out: list[_Span] = []
    k = 0
    for first, end in coalesce(starts, lengths, gap):
        held = []
        while k < len(members) and starts[k] < end:
            held.append(members[k])
            k += 1
        out.append((rel, first, end, held))
    return out


def _batches(spans: list[_Span]) -> list[list[_Span]]:
    out: list[list[_Span]] = []
    size = BATCH_BYTES
    for span in spans:
        if size + span[2] - span[1] > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(span)
        size += span[2] - span[1]
    return out


def _read(storage: Storage, batch: list[_Span]) -> list[bytes | None]:
    """The spans' bytes; one at a time after a failed batch, None for each that fails."""
    try:
        return list(storage.read_ranges([s[0] for s in batch], [s[1] for s in batch],
                                        [s[2] - s[1] for s in batch]))
    except Exception:  # noqa: BLE001 - a missing file or a storage error: the values are left out
        pass
    out: list[bytes | None] = []
    for rel, first, end, _ in batch:
        try:
            out.append(storage.read(rel, first, end - first))
        except Exception:  # noqa: BLE001 - as above, for this file alone
            out.append(None)
    return out
