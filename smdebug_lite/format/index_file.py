"""The per-(step, worker) index JSON: where each tensor's record lives in the event file.

Layout and key order are smdebug's. Entries may carry extra keys that smdebug ignores:
`crc32c` (CRC32C of the record payload, checked on read), `dtype`/`shape`/`content_offset`
(where the raw bytes are, so readers skip protobuf parsing), `orig_dtype` (the logical
dtype when it was widened for smdebug's sake; see tensor_codec) and `inline` (a one-element
value itself, see inline_value).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from smdebug_lite.exceptions import IndexFileCorrupted, IndexReaderException, JSONFileRejected
from smdebug_lite.format import bounded_json
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.format.locations import parse_index_file_name
from smdebug_lite.modes import ALLOWED_MODE_NAMES, ModeKeys


@dataclass(slots=True)
class TensorEntry:
    name: str
    start_idx: int
    length: int
    crc32c: int | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    content_offset: int | None = None
    orig_dtype: str | None = None
    inline: str | None = None

    def to_json_dict(self) -> dict:
        d: dict = {"tensorname": self.name, "start_idx": self.start_idx, "length": self.length}
        if self.crc32c is not None:
            d["crc32c"] = self.crc32c
        if self.content_offset is not None:
            d["dtype"] = self.dtype
            d["shape"] = list(self.shape or ())
            d["content_offset"] = self.content_offset
        if self.orig_dtype is not None:
            d["orig_dtype"] = self.orig_dtype
        if self.inline is not None:
            d[INLINE_KEY] = self.inline
        return d


@dataclass(slots=True)
class ShapeEntry:
    name: str
    original_name: str
    shape: tuple[int, ...]

    def to_json_dict(self) -> dict:
        return {"tensorname": self.name, "originalname": self.original_name, "shape": list(self.shape)}


@dataclass(slots=True)
class IndexDocument:
    """One index file: a step of one worker."""

    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    event_file_name: str | None
    tensors: list[TensorEntry] = field(default_factory=list)
    shapes: list[ShapeEntry] = field(default_factory=list)

    def to_json(self) -> str:
        meta: dict = {"mode": self.mode.name, "mode_step": self.mode_step}
        if self.event_file_name is not None and self.tensors:
            meta["event_file_name"] = self.event_file_name
        return json.dumps(
            {
                "meta": meta,
                "tensor_payload": [t.to_json_dict() for t in self.tensors],
                "shape_payload": [s.to_json_dict() for s in self.shapes],
            }
        )


def parse_index(text: str | bytes, path: str) -> IndexDocument:
    """Parse an index file; errors name the file and what is wrong with it (the JSON is
    parsed within bounded_json's size and depth bounds)."""
    parsed = parse_index_file_name(path)
    if parsed is None:
        raise IndexReaderException(f"{path}: not an index file name (<step>_<worker>.json expected)")
    step, worker = parsed
    try:
        doc = bounded_json.loads(text, path)
    except JSONFileRejected as e:
        raise IndexFileCorrupted(path, e.reason, step, worker) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise IndexReaderException(f"{path}: corrupt index file (no 'meta' object)")
    meta = doc["meta"]
    mode_name = meta.get("mode", "GLOBAL")
    if mode_name not in ALLOWED_MODE_NAMES:
        raise IndexReaderException(f"{path}: meta.mode={mode_name!r} is not a mode")
    try:
        mode_step = int(meta.get("mode_step", step))
        tensors = [
            TensorEntry(
                e["tensorname"], int(e["start_idx"]), int(e["length"]), e.get("crc32c"),
                e.get("dtype"), tuple(e["shape"]) if "shape" in e else None,
                e.get("content_offset"), e.get("orig_dtype"),
                e[INLINE_KEY] if isinstance(e.get(INLINE_KEY), str) else None,
            )
            for e in doc.get("tensor_payload") or ()
        ]
        shapes = [
            ShapeEntry(e["tensorname"], e.get("originalname", e["tensorname"]), tuple(e["shape"]))
            for e in doc.get("shape_payload") or ()
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise IndexReaderException(f"{path}: corrupt index entry ({type(e).__name__}: {e})") from None
    return IndexDocument(step, worker, ModeKeys[mode_name], mode_step, meta.get("event_file_name"),
                         tensors, shapes)
