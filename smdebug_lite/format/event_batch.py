"""Views the tensors of many smdebug event records at once (one tensor over many steps).

Walking each record (`event_view.view_event`) costs a few microseconds of Python, as much as
reading it. The records of one tensor at different steps differ only in wall time, step and
mode step, so records of equal length nearly always share every other byte up to the tensor
bytes. Those are checked together with numpy against the first of them (walked and verified
in full): same framing header (so the same, verified, length CRC), smdebug's footer, a step
varint of the same width, identical bytes from there to the tensor bytes. Their tensors are
then views into one buffer. Records that differ are walked one by one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from smdebug_lite.format.event_view import locate, view_event

_MIN_GROUP = 8  # fewer records of a length are walked one by one
_MAGIC = np.frombuffer(b"\xb3\xc0\x2d\x06", np.uint8)  # smdebug's footer, little-endian


def view_events(datas: Sequence[bytes], lengths: Sequence[int],
                tag: str | None = None) -> list[np.ndarray | None]:
    """The tensor of each framed record `datas[i]` (expected `lengths[i]` bytes long) as a
    read-only array, or None where the framing fails, the layout needs protobuf or the
    record's tag is not `tag` (when given: the tensor name the index gives)."""
    out: list[np.ndarray | None] = [None] * len(datas)
    groups: dict[int, list[int]] = {}
    for i, data in enumerate(datas):
        n = len(data)
        if n == lengths[i]:
            g = groups.get(n)
            if g is None:
                groups[n] = [i]
            else:
                g.append(i)
    for length, idx in groups.items():
        if len(idx) < _MIN_GROUP or not _view_group(datas, idx, length, out, tag):
            for i in idx:
                out[i] = view_event(datas[i], 0, length, tag)
    return out


def _view_group(datas: Sequence[bytes], idx: list[int], length: int,
                out: list[np.ndarray | None], tag: str | None) -> bool:
    """Fill `out` for the records `idx`, all `length` bytes long; False when the first of
    them cannot be viewed (then each is walked alone). The first one's tag is compared with
    `tag`; the others' are among the bytes compared with the first's."""
    first = datas[idx[0]]
    found = locate(first, 0, length, None if tag is None else tag.encode("utf-8"))
    if found is None or first[length - 4 : length] != _MAGIC.tobytes():
        return False
    step_start, template_start, content, dtype, shape = found
    nbytes = math.prod(shape) * dtype.itemsize
    buf = b"".join([datas[i] for i in idx])
    rows = np.frombuffer(buf, np.uint8).reshape(len(idx), length)
    head = rows[0]
    ok = (rows[:, :12] == head[:12]).all(axis=1)
    ok &= (rows[:, length - 4 :] == _MAGIC).all(axis=1)
    if template_start > step_start:  # a step varint: same width (continuation bits) as the first
        ok &= rows[:, step_start - 1] == 0x10
        if template_start - step_start > 1:
            ok &= (rows[:, step_start : template_start - 1] >= 0x80).all(axis=1)
        ok &= rows[:, template_start - 1] < 0x80
    ok &= (rows[:, template_start:content] == head[template_start:content]).all(axis=1)
    del head
    if shape:
        values = rows[:, content : content + nbytes].view(dtype).reshape((len(idx), *shape))
        values.flags.writeable = False  # views of bytes already; a copy would not be
        views = list(values)
    else:
        views = [np.ndarray((), dtype, buf, content + k * length) for k in range(len(idx))]
    if ok.all():
        for i, arr in zip(idx, views, strict=True):
            out[i] = arr
    else:
        for k, i in enumerate(idx):
            out[i] = views[k] if ok[k] else view_event(datas[i], 0, length, tag)
    return True
