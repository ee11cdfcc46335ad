"""One index file parsed for reading: `StepIndex` and the checks of its entries.

Both sides read index files: a trial (`smdebug_lite.index`) and the compaction that packs them
into a manifest (`smdebug_lite.writer.compaction`), so the parsing lives with the format.

Index files are parsed into `StepIndex` objects that keep the JSON entry dicts as they come from
the JSON parser: building other objects per entry cost more than parsing the JSON itself, and the
trial only needs name -> entry lookups. Entries are validated when a value is read.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from smdebug_lite.config.reductions import REDUCTIONS_PREFIX, parse_reduction_tensor_name
from smdebug_lite.exceptions import (
    IndexFileCorrupted,
    IndexReaderException,
    JSONFileRejected,
    SMDebugValueError,
)
from smdebug_lite.format.bounded_json import check_size, slow_loads
from smdebug_lite.format.inline_value import inline_value
from smdebug_lite.format.locations import event_file_name, parse_index_file_name
from smdebug_lite.modes import ModeKeys

Entry = dict[str, Any]  # one tensor_payload item: tensorname, start_idx, length (+ our extras)
_MODES = {m.name: m for m in ModeKeys}

try:  # about twice as fast as the json module on index files, which dominate trial loading
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; json is the fallback
    _fast_loads = json.loads


def _loads(text: bytes, key: str) -> Any:
    """Parse an index file. orjson refuses more than 1024 levels of nesting without recursing
    that deep; what it refuses (e.g. NaN) goes to json through `slow_loads`, which first
    bounds the depth iteratively (json recurses per level) and names the file if it refuses.
    (orjson reads integers past 64 bits as floats; index files hold offsets, lengths and
    CRCs, all well below that.)"""
    try:
        return _fast_loads(text)
    except ValueError:
        return slow_loads(text, key)


class StepIndex:
    """One index file: what one worker saved at one step, and where in its event file."""

    __slots__ = ("step", "worker", "mode", "mode_step", "event_rel", "entries", "reductions",
                 "shapes", "original_names", "names", "tracked", "_size", "key")

    def __init__(self, step: int, worker: str, mode: ModeKeys, mode_step: int,
                 event_rel: str | None, entries: dict[str, Entry]) -> None:
        self.step = step
        self.worker = worker
        self.mode = mode
        self.mode_step = mode_step
        self.event_rel = event_rel
        self.entries = entries  # raw tensors: name -> entry
        self.reductions: dict[str, dict[tuple[str, bool], Entry]] | None = None
        self.shapes: dict[str, tuple[int, ...]] | None = None
        self.original_names: dict[str, str] | None = None
        self.names: dict[str, Any] | set[str] = entries  # every base tensor name present
        self.tracked = 0  # entries the garbage collector tracks (see _shapes_as_strings)
        self._size = -1
        self.key = ""  # the index file, relative to the trial

    @property
    def size(self) -> int:
        """Bytes of the event file covered by the index (the whole file for our writers).
        Entries with impossible offsets are left out: reading them explains the problem."""
        if self._size < 0:
            every = list(self.entries.values())
            if self.reductions:
                every += [e for r in self.reductions.values() for e in r.values()]
            try:
                self._size = max([e["start_idx"] + e["length"] for e in every], default=0)
            except (KeyError, TypeError):
                self._size = max([e["start_idx"] + e["length"] for e in every
                                  if entry_problem(e) is None], default=0)
        return self._size

    def __repr__(self) -> str:
        return f"<StepIndex step={self.step} worker={self.worker} {self.mode.name}:{self.mode_step}>"


_SHAPES: dict[object, tuple[int, ...]] = {}
SHAPE_CACHE = _SHAPES  # public name: shape text -> shared tuple, read by the value reader
_PAYLOAD_QUOTED = b'"tensor_payload": "['
_TAIL = b'}], "shape_payload": []}'
_TAIL_QUOTED = b'}]", "shape_payload": "[]"}'


def _shapes_as_strings(text: bytes) -> bytes | None:
    """The index text with each tensor_payload `"shape": [..]` turned into a JSON string.

    JSON lists make the parsed entry dicts containers the cyclic garbage collector must track
    and rescan (hundreds of thousands of them for a long job, in every collection of the user's
    process until a full one). With the shape as a string every entry holds atomic values only
    and is never tracked; `entry_shape` turns it into a (shared) tuple on use. Applied only to
    the layout smdebug-lite writes (no shape_payload), where the only other brackets are the
    two payload lists: every `[` gets a quote before it and every `]` one after it (two
    single-byte replaces, several times cheaper than searching for the shapes), then the payload
    lists get theirs back. A bracket inside a string (a tensor name) would thus end that string
    and leave invalid JSON, which the caller parses the usual way instead; a text with any
    other list (counted first) is left to the searched conversion, so other values keep
    their JSON types.
    """
    if not text.endswith(_TAIL) or text.count(b"[") != text.count(b'"shape": [') + 2:
        return None  # another list (a damaged or foreign entry): the searched conversion
    quoted = text.replace(b"[", b'"[').replace(b"]", b']"')
    at = quoted.find(_PAYLOAD_QUOTED)
    if at < 0:
        return None
    view = memoryview(quoted)
    return b"".join((view[:at], b'"tensor_payload": [',
                     view[at + len(_PAYLOAD_QUOTED) : len(quoted) - len(_TAIL_QUOTED)], _TAIL))


def _shapes_searched(text: bytes) -> bytes | None:
    """`_shapes_as_strings` for a text with brackets in its strings: the shapes are found by
    their text (`"shape": [..], "content_offset"`), leaving any other bracket alone."""
    if text.endswith(b'"shape_payload": []}'):
        return text.replace(b'"shape": [', b'"shape": "[').replace(
            b'], "content_offset"', b']", "content_offset"')
    return None


_PAYLOAD_OPEN = b'"tensor_payload": [{'


def _first_entry_has_shape(text: bytes) -> bool | None:
    """Whether the first tensor_payload entry records a shape (smdebug-lite's layout) or not
    (smdebug's); None when there is no entry to look at. Looks at that entry's text only."""
    i = text.find(_PAYLOAD_OPEN)
    if i < 0:
        return None
    j = text.find(b"}", i)
    return text.find(b'"shape"', i, j if j >= 0 else len(text)) >= 0


_HEADER = 12  # a TFRecord's length and its CRC, before the payload
_MIN_RECORD = 16  # a TFRecord's framing alone: length, its CRC, the payload's CRC


def sound_inline(entry: Entry) -> np.ndarray | None:
    """The value inlined in an index entry when the entry is sound (what `entry_problem`
    checks) and agrees with it (dtype and shape); else None: the record is then read, and a
    damaged entry or record is reported as it would be without the inlined value."""
    arr = inline_value(entry)
    if arr is None or not _fields_sound(entry):
        return None
    get = entry.get
    dtype = get("dtype")
    if dtype is not None and get("orig_dtype") is None and dtype != arr.dtype.str:
        return None
    if get("shape") is not None:
        try:
            if entry_shape(entry) != arr.shape:
                return None
        except ValueError:
            return None
    return arr


def entry_problem(entry: Entry) -> str | None:
    """What makes an index entry unusable (a missing key, an impossible offset), else None.
    Checked where a record is explained, not on the fast paths, which test the types they use."""
    if not isinstance(entry, dict):
        return f"an entry is a {type(entry).__name__}, not an object"
    if _fields_sound(entry):
        if entry.get("shape") is None:
            return None
        try:
            entry_shape(entry)
            return None
        except ValueError as e:
            return f"the entry of tensor {entry.get('tensorname')!r}: {e}"
    return _entry_problem_named(entry)


def _fields_sound(entry: dict) -> bool:
    """Whether an entry's location, checksum and dtype fields are all usable (`entry_problem`
    without the shape, and without building a message)."""
    get = entry.get
    start, length, crc, offset = get("start_idx"), get("length"), get("crc32c"), \
        get("content_offset")
    dtype, orig = get("dtype"), get("orig_dtype")
    return (start.__class__ is int and length.__class__ is int and start >= 0
            and length >= _MIN_RECORD
            and (crc is None or (crc.__class__ is int and 0 <= crc < 1 << 32))
            and (offset is None or (offset.__class__ is int and _HEADER <= offset < length))
            and (dtype is None or dtype.__class__ is str)
            and (orig is None or orig.__class__ is str))


def _entry_problem_named(entry: dict) -> str | None:
    """`entry_problem` for an entry that failed its quick check: what exactly is wrong."""
    what = f"the entry of tensor {entry.get('tensorname')!r}"
    for key, least in (("start_idx", 0), ("length", _MIN_RECORD)):
        if key not in entry:
            return f"{what} has no {key!r}"
        v = entry[key]
        if v.__class__ is not int:
            return f"{what} has {key}={v!r}; expected an integer"
        if v < least:
            return f"{what} has {key}={v}; expected an integer >= {least}"
    crc = entry.get("crc32c")
    if crc is not None and (crc.__class__ is not int or not 0 <= crc < 1 << 32):
        return f"{what} has crc32c={crc!r}; expected a 32-bit unsigned integer"
    offset = entry.get("content_offset")
    if offset is not None and (offset.__class__ is not int or not
                               _HEADER <= offset < entry["length"]):
        return (f"{what} has content_offset={offset!r}; expected an integer within the record's"
                f" payload ({_HEADER} to {entry['length'] - 1})")
    for key in ("dtype", "orig_dtype"):
        v = entry.get(key)
        if v is not None and v.__class__ is not str:
            return f"{what} has {key}={v!r}; expected a dtype name"
    return None


def entry_shape(entry: Entry) -> tuple[int, ...] | None:
    """The shape recorded in an index entry, as a tuple (None when it records none)."""
    shape = entry.get("shape")
    if shape is None or shape.__class__ is tuple:
        return shape
    return shape_tuple(shape)


def shape_tuple(shape: object) -> tuple[int, ...]:
    """A shared tuple for a shape given as a tuple, a list or the string form of a list."""
    t = _SHAPES.get(shape) if shape.__class__ is not list else None
    if t is None:
        try:
            parsed = json.loads(shape) if isinstance(shape, str) else shape
            t = tuple(_dim(d) for d in parsed)  # type: ignore[union-attr]
        except (TypeError, ValueError, RecursionError):
            raise ValueError(f"shape {shape!r} is not a list of integers >= 0") from None
        if len(_SHAPES) > 65536:
            _SHAPES.clear()
        t = _SHAPES.setdefault(t, t)
        if isinstance(shape, str):
            _SHAPES[shape] = t
    return t


def _dim(d: object) -> int:
    if d.__class__ is not int or d < 0:  # type: ignore[operator]
        raise ValueError
    return d  # type: ignore[return-value]


class _Layout:
    """How the tensor names of one index file split into raw tensors and saved reductions.

    Consecutive index files of a job nearly always list the same names in the same order, so
    the split is worked out once per distinct list and shared (the `names` set too)."""

    __slots__ = ("all", "raw", "groups", "names")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.all = names
        raw: list[str] = []
        groups: dict[str, list[tuple[tuple[str, bool], str]]] = {}
        for name in dict.fromkeys(names):
            if _name(name).startswith(REDUCTIONS_PREFIX):
                try:
                    base, red, is_abs = parse_reduction_tensor_name(name)
                except SMDebugValueError:
                    raw.append(name)  # not a well-formed reduction name: a tensor of its own
                    continue
                groups.setdefault(base, []).append(((red, is_abs), name))
                continue
            raw.append(name)
        self.raw = tuple(raw)
        self.groups = tuple((base, tuple(g)) for base, g in groups.items())
        self.names = frozenset(raw).union(groups)


_LAYOUTS: dict[tuple[str, ...], _Layout] = {}
_LAYOUTS_MAX = 1024


def _layout(names: tuple[str, ...]) -> _Layout:
    found = _LAYOUTS.get(names)
    if found is None:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        found = _LAYOUTS[names] = _Layout(names)
    return found


class _Malformed(ValueError):
    """An index document whose values make no sense; the message says which."""


def _event_rel(value: object, step: int, worker: str) -> str:
    """meta.event_file_name, which must stay inside the trial (a damaged or hostile index
    file must not send reads elsewhere); smdebug's default when it is absent."""
    if not value:
        return event_file_name(step, worker)
    if not isinstance(value, str) or value.startswith(("/", "\\")) or (
            ".." in value and ".." in value.split("/")) or "\0" in value:
        raise _Malformed(f"meta.event_file_name={value!r} is not a path inside the trial")
    return value


def _corrupt(key: str, step: int, worker: str, reason: str) -> IndexFileCorrupted:
    return IndexFileCorrupted(key, reason, step, worker)


def parse_step_index(text: bytes | str, key: str,
                     parsed: tuple[int, str] | None = None) -> StepIndex:
    """Parse one index file. `IndexFileCorrupted` (an IndexReaderException) names the file, its
    step and the problem. `parsed`: (step, worker) from the key when the caller has it."""
    if parsed is None:
        parsed = parse_index_file_name(key)
    if parsed is None:
        raise IndexReaderException(f"{key}: not an index file name (<step>_<worker>.json expected)")
    step, worker = parsed
    if isinstance(text, str):
        text = text.encode("utf-8")
    try:
        check_size(text, key)
        has_shape = _first_entry_has_shape(text)
        compact = (_shapes_as_strings(text) or _shapes_searched(text)) if has_shape else None
        doc = None
        if compact is not None:
            try:
                doc = _fast_loads(compact)
            except ValueError:  # a bracket in a name, or not quite our layout after all
                compact = _shapes_searched(text)
                try:
                    doc = None if compact is None else _fast_loads(compact)
                except ValueError:
                    compact = None
        if doc is None:
            doc = _loads(text, key)
    except JSONFileRejected as e:
        raise _corrupt(key, step, worker, e.reason) from None
    if not text.strip():
        raise _corrupt(key, step, worker, "the file is empty")
    try:
        meta = doc["meta"]
        mode = _MODES.get(meta.get("mode", "GLOBAL"))
        if mode is None:
            raise _Malformed(f"meta.mode={meta.get('mode')!r} is not one of {', '.join(_MODES)}")
        mode_step = int(meta.get("mode_step", step))
        payload = doc.get("tensor_payload") or ()
        if compact is not None:
            entries = {e["tensorname"]: e for e in payload}
            layout = _layout(tuple(entries))  # cached per name list; checks the names
        elif has_shape is False:  # smdebug's layout: name, start_idx, length
            layout = _layout(tuple([e["tensorname"] for e in payload]))
            entries = dict(zip(layout.all, payload, strict=True))
        else:
            entries = {}
            for e in payload:
                shape = e.get("shape")
                if shape is not None:
                    try:
                        e["shape"] = shape_tuple(shape)
                    except ValueError:
                        pass  # reading this tensor explains it; the others stay readable
                entries[e["tensorname"]] = e
            layout = _layout(tuple(entries))
        shape_payload = doc.get("shape_payload") or ()
        event_rel = _event_rel(meta.get("event_file_name"), step, worker) if entries else None
    except KeyError as e:
        raise _corrupt(key, step, worker, f"the key {e} is missing") from None
    except _Malformed as e:
        raise _corrupt(key, step, worker, str(e)) from None
    except (ValueError, TypeError, AttributeError) as e:
        raise _corrupt(key, step, worker, f"not an index document ({type(e).__name__}: {e})"
                       ) from None
    si = StepIndex(step, worker, mode, mode_step, event_rel, entries)
    si.key = key
    if compact is None and payload and payload[0].get("shape") is not None:
        si.tracked = len(entries)
    if layout.groups:
        every = entries
        si.entries = si.names = entries = {n: every[n] for n in layout.raw}
        si.reductions = {base: {k: every[n] for k, n in group} for base, group in layout.groups}
    if shape_payload:
        try:
            si.shapes = {_name(e["tensorname"]): tuple(int(d) for d in e["shape"])
                         for e in shape_payload}
            originals = {e["tensorname"]: _name(e["originalname"]) for e in shape_payload
                         if e.get("originalname", e["tensorname"]) != e["tensorname"]}
        except (KeyError, TypeError, ValueError) as e:
            raise _corrupt(key, step, worker,
                           f"malformed shape_payload entry ({type(e).__name__}: {e})") from None
        si.original_names = originals or None
    if si.shapes:
        si.names = set(entries).union(si.reductions or (), si.shapes)
    else:  # shared by the index files listing the same names: compared by identity
        si.names = layout.names
    return si


def all_entries(si: StepIndex) -> list[Entry]:
    """Raw and reduction entries of an index file."""
    every = list(si.entries.values())
    if si.reductions:
        every += [e for r in si.reductions.values() for e in r.values()]
    return every


def _name(value: object) -> str:
    if value.__class__ is not str:
        raise TypeError(f"tensor name {value!r} is not a string")
    return value  # type: ignore[return-value]
