"""The compacted index of a trial: the per-step index files packed into a few chunk objects.

Opening a long trial from S3 costs one GET per index file (steps x workers). A manifest holds
the same index documents, byte for byte, in one chunk per `CHUNK_STEPS` steps, plus the values
of scalar records (saved reductions, one-element tensors) inlined, so a reader makes O(chunks)
requests. The per-step files stay where they are: smdebug 1.0.34 never looks under
`manifest/`, and a reader falls back to them whenever the manifest fails a check.

Version 2 also lets a reader open the trial without parsing any index document: each chunk
starts with columns (step, worker, mode, mode step, tensor-name set of every index document),
then the documents, then one column section per tensor holding its inlined values and the
values of its small raw records (up to `SMDEBUG_MANIFEST_VALUE_BYTES`). Opening
reads the head and each chunk's first bytes (the columns); a tensor's history reads its own
section of each chunk; the documents are decompressed only when a step's entries are asked for.

Layout (see docs/format.md, "Compacted index"):

* `manifest/manifest.json`: the head, a JSON line then the SHA-256 of that line. It lists the
  chunks (key, step range, number of index documents, SHA-256 and size of the chunk, size and
  SHA-256 of its prefix: header line + columns) and the last index file covered with the CRC32
  of its bytes. Written last, atomically: it is the commit point.
* `manifest/chunks/<first>-<last>-<sha12>.zz`: a JSON header line (sizes of the sections and
  the CRC32 of each tensor section), then zlib sections: columns, documents (per index document
  a JSON line {"key", "len", "crc32", "inline"} followed by `len` raw bytes and a newline), and
  one per tensor. Named by content, so a chunk is never rewritten in place while someone reads
  it.

This module is the document both sides share: building it, and reading it back checked. The
compaction that writes it belongs to the writer (`smdebug_lite.writer.compaction`); a trial
reads it through `smdebug_lite.index` (`compacted.py`, `reader.py`).

Nothing here is trusted: every check failure raises `ManifestInvalid`, which readers log as a
warning before reading the per-step files instead. A version 1 manifest (no columns) is refused
the same way, with a message saying that `smdebug-lite compact` rewrites it.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from time import sleep as _sleep
from typing import TYPE_CHECKING

import numpy as np

from smdebug_lite.format.inflate_ahead import (
    AHEAD_MIN_BYTES,
    InflateError,
    inflate_pieces,
    inflate_whole,
)
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.format.locations import (
    INDEX_DIR,
    index_file_name,
    parse_index_file_name,
    serialize_worker,
)

if TYPE_CHECKING:
    from smdebug_lite.storage import Storage

try:  # a chunk holds a JSON line per index document: a few times faster than json's
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; json is the fallback
    _loads = json.loads

MANIFEST_DIR = "manifest"
HEAD_KEY = f"{MANIFEST_DIR}/manifest.json"
CHUNK_DIR = f"{MANIFEST_DIR}/chunks"
HEAD_FORMAT = "smdebug-lite-manifest"
CHUNK_FORMAT = "smdebug-lite-manifest-chunk"
VERSION = 2
CHUNK_STEPS = 1000  # steps per chunk: 100 chunks for a 100k-step trial
DAMAGED = -1  # the name-set column of an index document that could not be parsed
_MAX_HEAD_BYTES = 64 * 1024 * 1024
_MAX_CHUNK_BYTES = 4 * 1024 * 1024 * 1024
_MAX_SECTION_BYTES = 1024 * 1024 * 1024  # decompressed
# The columns of every index document, in this order after the columns' JSON line.
COLUMNS = (("step", "<i8"), ("worker", "<i4"), ("mode", "<i1"), ("mode_step", "<i8"),
           ("nameset", "<i4"))


class ManifestInvalid(Exception):
    """A manifest that must not be used; `reason` says which check failed."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ChunkRef:
    key: str
    first_step: int
    last_step: int
    files: int
    sha256: str
    nbytes: int
    prefix: int = 0  # bytes of the header line and the columns: what opening a trial reads
    prefix_sha256: str = ""
    # Bytes up to which values of raw tensors are in the tensor sections (0: one-element
    # values only, as chunks of earlier releases hold).
    values: int = 0

    def to_json(self) -> dict:
        out = {"key": self.key, "first_step": self.first_step, "last_step": self.last_step,
               "files": self.files, "sha256": self.sha256, "bytes": self.nbytes,
               "prefix": self.prefix, "prefix_sha256": self.prefix_sha256}
        if self.values:
            out["values"] = self.values
        return out


@dataclass(slots=True)
class Manifest:
    chunks: list[ChunkRef] = field(default_factory=list)
    last_key: str = ""  # the last index file covered (keys sort by step, then worker)
    last_key_crc32: int = 0
    last_step_of_worker: dict[str, int] = field(default_factory=dict)

    @property
    def files(self) -> int:
        return sum(c.files for c in self.chunks)

    @property
    def first_step(self) -> int | None:
        return self.chunks[0].first_step if self.chunks else None

    @property
    def last_step(self) -> int | None:
        return self.chunks[-1].last_step if self.chunks else None


@dataclass(slots=True)
class IndexRecord:
    """One index file as the manifest holds it: its key, its bytes, and inlined values
    (full tensor name -> `encode_inline` text); `step` and `worker` parsed from the key when
    decoded (-1 and "" before). The compactor fills what the columns hold from the parsed
    document: mode and mode step, the tensor names a reader lists for it (`names`), the names
    of its raw (not reduction) entries, original names, or why it could not be parsed."""

    key: str
    raw: bytes
    inline: dict[str, str] = field(default_factory=dict)
    step: int = -1
    worker: str = ""
    mode: int = 0
    mode_step: int = -1
    names: tuple[str, ...] = ()
    entry_names: frozenset[str] = frozenset()
    original_names: dict[str, str] | None = None
    damage: str | None = None
    # Inlined names whose document entry already holds the same text (a writer that inlines
    # as it writes): not repeated in the record's header line.
    in_doc: frozenset[str] = frozenset()
    # Small multi-element values of raw entries (the compactor's choice): tensor sections only.
    values: dict[str, np.ndarray] = field(default_factory=dict)
    # Saved reductions: their entries' names, and per tensor its (reduction, abs) pairs.
    reduction_names: frozenset[str] = frozenset()
    reduced: dict[str, frozenset[tuple[str, bool]]] = field(default_factory=dict)


@dataclass(slots=True)
class ChunkColumns:
    """The columns of one chunk: one row per index document, in key order."""

    step: np.ndarray
    worker: np.ndarray  # index into `workers`
    mode: np.ndarray  # ModeKeys value (0 for a damaged document)
    mode_step: np.ndarray
    nameset: np.ndarray  # index into `namesets`, DAMAGED for a damaged document
    workers: list[str]
    namesets: list[tuple[str, ...]]
    damaged: dict[int, tuple[str, str]]  # row -> (key, reason)
    original_names: dict[int, dict[str, str]]  # row -> {name: original name}
    tensors: dict[str, tuple[int, int, int]]  # tensor -> (offset in the chunk, bytes, CRC32)
    docs: tuple[int, int]  # (offset in the chunk, bytes) of the documents section


# -- inline values ------------------------------------------------------------------------

def attach_inline(entries: Sequence[dict], inline: dict[str, str]) -> None:
    """Put inlined values into the index entries they belong to (matched by tensor name)."""
    for e in entries:
        text = inline.get(e.get("tensorname"))  # type: ignore[arg-type]
        if text.__class__ is str:
            e[INLINE_KEY] = text


# -- chunks: building ---------------------------------------------------------------------

def _encode_columns(records: Sequence[IndexRecord]) -> bytes:
    workers = sorted({r.worker for r in records})
    wid = {w: i for i, w in enumerate(workers)}
    namesets: dict[tuple[str, ...], int] = {}
    n = len(records)
    cols = {name: np.zeros(n, dtype=dt) for name, dt in COLUMNS}
    damaged: dict[str, list[str]] = {}
    originals: dict[str, dict[str, str]] = {}
    for i, r in enumerate(records):
        cols["step"][i] = r.step
        cols["worker"][i] = wid[r.worker]
        if r.damage is not None:
            cols["nameset"][i] = DAMAGED
            damaged[str(i)] = [r.key, r.damage]
            continue
        cols["mode"][i] = r.mode
        cols["mode_step"][i] = r.mode_step
        cols["nameset"][i] = namesets.setdefault(r.names, len(namesets))
        if r.original_names:
            originals[str(i)] = r.original_names
    meta = {"rows": n, "workers": workers, "namesets": [list(k) for k in namesets],
            "damaged": damaged, "original_names": originals}
    return b"".join([json.dumps(meta, separators=(",", ":")).encode(), b"\n"]
                    + [cols[name].tobytes() for name, _ in COLUMNS])


def _encode_docs(records: Sequence[IndexRecord]) -> bytes:
    parts: list[bytes] = []
    for r in records:
        meta = {"key": r.key, "len": len(r.raw), "crc32": zlib.crc32(r.raw)}
        inline = {k: v for k, v in r.inline.items() if k not in r.in_doc} if r.in_doc \
            else r.inline
        if inline:
            meta["inline"] = inline
        parts += [json.dumps(meta, separators=(",", ":")).encode(), b"\n", r.raw, b"\n"]
    return b"".join(parts)


def _encode_tensor_sections(records: Sequence[IndexRecord]) -> list[tuple[str, bytes]]:
    """Per raw tensor with inlined or small values: its rows and values, grouped by dtype and
    shape."""
    by_name: dict[str, dict[tuple[str, str], tuple[list[int], list[bytes]]]] = {}
    reduced: dict[str, set[tuple[str, bool]]] = {}
    for r in records:
        for name, pairs in r.reduced.items():
            reduced.setdefault(name, set()).update(pairs)

    def add(name: str, dtype: str, dims: str, row: int, value: bytes) -> None:
        rows, datas = by_name.setdefault(name, {}).setdefault((dtype, dims), ([], []))
        rows.append(row)
        datas.append(value)

    for i, r in enumerate(records):
        if r.damage is not None:
            continue
        for name, text in r.inline.items():
            if (name not in r.entry_names and name not in r.reduction_names) \
                    or text.__class__ is not str:
                continue
            try:
                dtype, dims, data = text.rsplit("|", 2)
                value = bytes.fromhex(data)
            except ValueError:
                continue
            add(name, dtype, dims, i, value)
        for name, arr in r.values.items():
            if name in r.entry_names:
                add(name, arr.dtype.str, ",".join(map(str, arr.shape)), i,
                    np.ascontiguousarray(arr).tobytes())
    out = []
    for name in sorted(by_name):
        groups = by_name[name]
        meta = {"groups": [[dt, dims, len(rows)] for (dt, dims), (rows, _) in groups.items()],
                "reduced": sorted([r, a] for r, a in reduced.get(name, ()))}
        parts = [json.dumps(meta, separators=(",", ":")).encode(), b"\n"]
        for rows, datas in groups.values():
            parts += [np.asarray(rows, dtype="<i4").tobytes(), b"".join(datas)]
        out.append((name, _deflate_values(b"".join(parts))))
    return out


_SAMPLE = 16 * 1024


def _deflate_values(data: bytes) -> bytes:
    """A tensor section as a zlib stream: level 1 (saved values, floats mostly, hardly shrink
    more at higher levels), or stored blocks (level 0) when a sample from its middle shrinks
    by less than a tenth. The values of trained weights barely compress, and compressing them
    took half of a compaction's time for a tenth of their size at best."""
    if len(data) >= 4 * _SAMPLE:
        middle = len(data) // 2
        sample = data[middle:middle + _SAMPLE]
        if len(zlib.compress(sample, 1)) > 0.9 * len(sample):
            return zlib.compress(data, 0)
    return zlib.compress(data, 1)


def encode_chunk(records: Sequence[IndexRecord]) -> tuple[bytes, int, int, int]:
    """(chunk, first step, last step, prefix bytes) of records given in key order, each with
    `step` and `worker` set."""
    for r in records:
        if r.step < 0:
            r.step, r.worker = _parse_key(r.key, "record")
    steps = [r.step for r in records]
    columns = zlib.compress(_encode_columns(records), 6)
    docs = zlib.compress(_encode_docs(records), 6)
    tensors = _encode_tensor_sections(records)
    header = {"format": CHUNK_FORMAT, "version": VERSION, "first_step": min(steps),
              "last_step": max(steps), "files": len(records), "columns": len(columns),
              "docs": len(docs),
              "tensors": [[name, len(data), zlib.crc32(data)] for name, data in tensors]}
    line = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    data = b"".join([line, columns, docs] + [d for _, d in tensors])
    return data, header["first_step"], header["last_step"], len(line) + len(columns)


def chunk_key(first: int, last: int, sha256: str) -> str:
    return f"{CHUNK_DIR}/{first:012d}-{last:012d}-{sha256[:12]}.zz"


def build_chunk(records: Sequence[IndexRecord], values: int = 0) -> tuple[bytes, ChunkRef]:
    """A chunk and the head's reference to it. `values`: the bytes up to which the compactor
    kept raw tensors' values (recorded in the head: a reader opens a trial whose chunks all
    hold them on demand)."""
    data, first, last, prefix = encode_chunk(records)
    digest = hashlib.sha256(data).hexdigest()
    return data, ChunkRef(chunk_key(first, last, digest), first, last, len(records), digest,
                          len(data), prefix, hashlib.sha256(data[:prefix]).hexdigest(), values)


# -- chunks: reading ----------------------------------------------------------------------

def _inflate(data: bytes, where: str, what: str) -> bytes:
    try:
        return inflate_whole(data, _MAX_SECTION_BYTES)
    except InflateError as e:
        raise ManifestInvalid(where, f"{what} section is {e}") from None


def decode_prefix(prefix: bytes, ref: ChunkRef) -> ChunkColumns:
    """The columns of a chunk from its first `ref.prefix` bytes, checked against the head's
    digest and step range."""
    where = ref.key
    if len(prefix) != ref.prefix or ref.prefix <= 0:
        raise ManifestInvalid(where, f"prefix of {len(prefix)} bytes; the head says {ref.prefix}")
    if hashlib.sha256(prefix).hexdigest() != ref.prefix_sha256:
        raise ManifestInvalid(where, "SHA-256 of the columns differs from the head's (damaged "
                                     "or replaced)")
    pos = prefix.find(b"\n")
    header = _json_line(prefix[:pos] if pos >= 0 else b"", where, "header")
    expect = {"format": CHUNK_FORMAT, "version": VERSION, "first_step": ref.first_step,
              "last_step": ref.last_step, "files": ref.files}
    for k, v in expect.items():
        if header.get(k) != v:
            raise ManifestInvalid(where, f"header {k}={header.get(k)!r}; expected {v!r}")
    try:
        ncol, ndocs = int(header["columns"]), int(header["docs"])
        offset = pos + 1 + ncol
        if offset != ref.prefix or ndocs < 0:
            raise ValueError("section sizes disagree with the prefix")
        docs = (offset, ndocs)
        offset += ndocs
        tensors: dict[str, tuple[int, int, int]] = {}
        for name, n, crc in header["tensors"]:
            tensors[str(name)] = (offset, int(n), int(crc))
            offset += int(n)
    except (KeyError, TypeError, ValueError) as e:
        raise ManifestInvalid(where, f"malformed header ({type(e).__name__}: {e})") from None
    if offset != ref.nbytes:
        raise ManifestInvalid(where, f"sections end at byte {offset}; the head says {ref.nbytes}")
    body = _inflate(prefix[pos + 1:], where, "columns")
    cols = _decode_columns(body, ref, where)
    cols.tensors, cols.docs = tensors, docs
    return cols


def _decode_columns(body: bytes, ref: ChunkRef, where: str) -> ChunkColumns:
    pos = body.find(b"\n")
    meta = _json_line(body[:pos] if pos >= 0 else b"", where, "columns")
    n = ref.files
    try:
        if meta["rows"] != n:
            raise ValueError(f"{meta['rows']} rows; the head says {n}")
        workers = [str(w) for w in meta["workers"]]
        namesets = [tuple(str(x) for x in s) for s in meta["namesets"]]
        damaged = {int(i): (str(k), str(r)) for i, (k, r) in meta["damaged"].items()}
        originals = {int(i): {str(a): str(b) for a, b in d.items()}
                     for i, d in meta["original_names"].items()}
        arrays = []
        at = pos + 1
        for _, dt in COLUMNS:
            size = np.dtype(dt).itemsize * n
            if at + size > len(body):
                raise ValueError("columns are truncated")
            arrays.append(np.frombuffer(body, dtype=dt, count=n, offset=at))
            at += size
        if at != len(body):
            raise ValueError("bytes after the columns")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ManifestInvalid(where, f"malformed columns ({type(e).__name__}: {e})") from None
    step, worker, mode, mode_step, nameset = arrays
    if n and (step.min() < ref.first_step or step.max() > ref.last_step
              or np.any(np.diff(step) < 0)):
        raise ManifestInvalid(where, f"steps outside {ref.first_step}..{ref.last_step} or out "
                                     "of order")
    if n and (worker.min() < 0 or worker.max() >= len(workers) or nameset.min() < DAMAGED
              or nameset.max() >= len(namesets)):
        raise ManifestInvalid(where, "a worker or name-set number is out of range")
    if set(np.flatnonzero(nameset == DAMAGED).tolist()) != set(damaged):
        raise ManifestInvalid(where, "damaged rows disagree with the name-set column")
    return ChunkColumns(step, worker, mode, mode_step, nameset, workers, namesets, damaged,
                        originals, {}, (0, 0))


def decode_docs(data: bytes, cols: ChunkColumns, ref: ChunkRef) -> list[IndexRecord]:
    """The index documents of a whole chunk (`data`, checked against the head's digest), each
    checked against the columns' step. The digest covers every document, so the CRC32 each
    record also carries (for a tool that takes one document out alone) is not computed again
    here: on a short trial opened whole that was 7 MB of checksumming per 1,000 documents."""
    return list(iter_docs(data, cols, ref, ahead=False))


def iter_docs(data: bytes, cols: ChunkColumns, ref: ChunkRef,
              ahead: bool = True) -> Iterator[IndexRecord]:
    """`decode_docs` one record at a time. With `ahead`, a large documents section is inflated
    in a background thread (`inflate_ahead`) while the caller works on the records already out.
    A check that fails raises ManifestInvalid after the records before it."""
    where = ref.key
    if len(data) != ref.nbytes:
        raise ManifestInvalid(where, f"{len(data)} bytes; the head says {ref.nbytes}")
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ManifestInvalid(where, "SHA-256 differs from the head's (damaged or replaced)")
    start, size = cols.docs
    section = data[start:start + size]
    ahead = ahead and len(section) >= AHEAD_MIN_BYTES
    pieces = _pieces(section, where) if ahead else iter((_inflate(section, where, "documents"),))
    body, pos, row, previous = b"", 0, 0, ""
    step_list, worker_list, worker_names = cols.step.tolist(), cols.worker.tolist(), cols.workers
    n_rows = len(step_list)
    while True:
        end = body.find(b"\n", pos)
        stop = -1
        if end >= 0:
            meta = _json_line(body[pos:end], where, f"record {row}")
            key, n, crc = meta.get("key"), meta.get("len"), meta.get("crc32")
            if not isinstance(key, str) or not isinstance(n, int) or not isinstance(crc, int) \
                    or n < 0:
                raise ManifestInvalid(where, f"record {row} header {meta!r} lacks key/len/crc32")
            stop = end + 2 + n
        if end < 0 or stop > len(body):  # the record is not all out yet
            piece = next(pieces, None)
            if piece is None:
                if end >= 0:
                    raise ManifestInvalid(where, f"record {key} is truncated")
                if pos < len(body):
                    raise ManifestInvalid(where, f"record {row} has no header line")
                break
            body = body[pos:] + piece if pos < len(body) else piece
            pos = 0
            continue
        if body[stop - 1:stop] != b"\n":
            raise ManifestInvalid(where, f"record {key} is truncated")
        if row >= n_rows:
            raise ManifestInvalid(where, f"record {key} is beyond the columns' rows")
        step, worker = step_list[row], worker_names[worker_list[row]]
        if key != index_file_name(step, serialize_worker(worker)) and _parse_key(
                key, where) != (step, worker):  # the usual name is checked without parsing
            raise ManifestInvalid(where, f"record {key} disagrees with the columns")
        if key <= previous:
            raise ManifestInvalid(where, f"record {key} is out of key order")
        inline = meta.get("inline") or {}
        if not isinstance(inline, dict):
            raise ManifestInvalid(where, f"record {key}: inline is not an object")
        yield IndexRecord(key, body[end + 1:stop - 1], inline, step, worker)
        row += 1
        if ahead and not row & 7:
            _sleep(0)  # (lets the inflating thread take the GIL now, not at the next forced switch)
        previous = key
        pos = stop
    if row != ref.files:
        raise ManifestInvalid(where, f"{row} records; the head says {ref.files}")


def _pieces(section: bytes, where: str) -> Iterator[bytes]:
    try:
        yield from inflate_pieces(section, _MAX_SECTION_BYTES)
    except InflateError as e:
        raise ManifestInvalid(where, f"documents section is {e}") from None


@dataclass(slots=True)
class TensorColumn:
    """A tensor's values in one chunk: groups of (rows, values of shape (n, *dims)).
    `reduced`: the (reduction, abs) pairs saved for the tensor by any document of the chunk
    (None when the section does not say: written by an earlier release)."""

    groups: list[tuple[np.ndarray, np.ndarray]]
    reduced: frozenset[tuple[str, bool]] | None = None


def decode_tensor_section(data: bytes, tensors: dict[str, tuple[int, int, int]], name: str,
                          ref: ChunkRef) -> TensorColumn:
    """One tensor's section (bytes as read), checked against the CRC32 that the chunk header
    (`ChunkColumns.tensors`) gives."""
    where = f"{ref.key} (tensor {name!r})"
    _, size, crc = tensors[name]
    if len(data) != size or zlib.crc32(data) != crc:
        raise ManifestInvalid(where, "CRC32 or size differs from the chunk header's")
    body = _inflate(data, where, "tensor")
    pos = body.find(b"\n")
    meta = _json_line(body[:pos] if pos >= 0 else b"", where, "tensor section")
    groups = []
    at = pos + 1
    try:
        for dtype, dims, count in meta["groups"]:
            dt = np.dtype(dtype)
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
            count = int(count)
            rows = np.frombuffer(body, dtype="<i4", count=count, offset=at)
            at += 4 * count
            size = dt.itemsize * count * int(np.prod(shape, dtype=np.int64))
            values = np.frombuffer(body, dtype=dt, count=size // dt.itemsize if dt.itemsize
                                   else 0, offset=at).reshape((count,) + shape)
            at += size
            if count and (rows.min() < 0 or rows.max() >= ref.files):
                raise ValueError("a row is out of range")
            groups.append((rows, values))
        if at != len(body):
            raise ValueError("bytes after the values")
    except (KeyError, TypeError, ValueError) as e:
        raise ManifestInvalid(where, f"malformed tensor section ({type(e).__name__}: {e})"
                              ) from None
    return TensorColumn(groups, _reduced_pairs(meta.get("reduced")))


def _reduced_pairs(found: object) -> frozenset[tuple[str, bool]] | None:
    if not isinstance(found, list):
        return None
    try:
        return frozenset((str(r), bool(a)) for r, a in found)
    except (TypeError, ValueError):
        return None


def decode_chunk(data: bytes, ref: ChunkRef) -> list[IndexRecord]:
    """Every record of a whole chunk after checking all of it: digests, header, columns, every
    record's CRC and step, and every tensor section."""
    cols = decode_prefix(data[:ref.prefix], ref)
    records = decode_docs(data, cols, ref)
    for name, (start, size, _) in cols.tensors.items():
        decode_tensor_section(data[start:start + size], cols.tensors, name, ref)
    return records


def fetch_prefixes(storage: Storage, refs: Sequence[ChunkRef]) -> list[bytes]:
    """The prefix (header line and columns) of every chunk, read concurrently (one ranged GET
    each on S3)."""
    try:
        return list(storage.read_ranges([r.key for r in refs], [0] * len(refs),
                                        [r.prefix for r in refs]))
    except FileNotFoundError as e:
        raise ManifestInvalid(str(e), "a chunk the head lists is missing") from None


def fetch_chunks(storage: Storage, refs: Sequence[ChunkRef]) -> list[bytes]:
    """Every chunk as stored (compressed), downloaded concurrently (one GET each on S3)."""
    try:
        return list(storage.read_many([r.key for r in refs]))
    except FileNotFoundError as e:
        raise ManifestInvalid(str(e), "a chunk the head lists is missing") from None


def read_chunks(storage: Storage, refs: Sequence[ChunkRef]) -> list[list[IndexRecord]]:
    """Every chunk's records, downloaded concurrently (one GET each on S3), fully checked."""
    datas = fetch_chunks(storage, refs)
    return [decode_chunk(d, r) for d, r in zip(datas, refs, strict=True)]


# -- head ---------------------------------------------------------------------------------

def encode_head(m: Manifest) -> bytes:
    doc = {"format": HEAD_FORMAT, "version": VERSION, "chunk_steps": CHUNK_STEPS,
           "first_step": m.first_step, "last_step": m.last_step, "files": m.files,
           "last_key": m.last_key, "last_key_crc32": m.last_key_crc32,
           "last_step_of_worker": m.last_step_of_worker,
           "chunks": [c.to_json() for c in m.chunks]}
    line = json.dumps(doc, sort_keys=True).encode()
    return line + b"\n" + hashlib.sha256(line).hexdigest().encode() + b"\n"


def decode_head(data: bytes, where: str = HEAD_KEY) -> Manifest:
    if len(data) > _MAX_HEAD_BYTES:
        raise ManifestInvalid(where, f"{len(data)} bytes; at most {_MAX_HEAD_BYTES} expected")
    line, _, rest = data.partition(b"\n")
    if rest.strip() != hashlib.sha256(line).hexdigest().encode():
        raise ManifestInvalid(where, "checksum line does not match (damaged or partial)")
    doc = _json_line(line, where, "head")
    if doc.get("format") == HEAD_FORMAT and doc.get("version") == 1:
        raise ManifestInvalid(where, "format version 1, written by an older smdebug-lite: run "
                                     "`smdebug-lite compact` on the trial to rewrite it as "
                                     f"version {VERSION}")
    if doc.get("format") != HEAD_FORMAT or doc.get("version") != VERSION:
        raise ManifestInvalid(where, f"format {doc.get('format')!r} version "
                                     f"{doc.get('version')!r}; expected {HEAD_FORMAT!r} {VERSION}")
    try:
        chunks = [ChunkRef(str(c["key"]), int(c["first_step"]), int(c["last_step"]),
                           int(c["files"]), str(c["sha256"]), int(c["bytes"]),
                           int(c["prefix"]), str(c["prefix_sha256"]), int(c.get("values", 0)))
                  for c in doc["chunks"]]
        m = Manifest(chunks, str(doc["last_key"]), int(doc["last_key_crc32"]),
                     {str(k): int(v) for k, v in doc["last_step_of_worker"].items()})
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ManifestInvalid(where, f"malformed head ({type(e).__name__}: {e})") from None
    previous = -1
    for c in chunks:
        if not c.key.startswith(CHUNK_DIR + "/") or ".." in c.key.split("/"):
            raise ManifestInvalid(where, f"chunk key {c.key!r} is not under {CHUNK_DIR}/")
        if c.first_step > c.last_step or c.first_step <= previous or c.files < 1 \
                or c.nbytes > _MAX_CHUNK_BYTES or not 0 < c.prefix <= c.nbytes:
            raise ManifestInvalid(where, f"chunk {c.key} has steps {c.first_step}..{c.last_step}"
                                         " overlapping or out of order, or impossible sizes")
        previous = c.last_step
    if doc.get("files") != m.files or doc.get("last_step") != m.last_step or (
            chunks and _step_of(m.last_key, where) != m.last_step):
        raise ManifestInvalid(where, "totals or step range disagree with the chunk list")
    return m


def read_head(storage: Storage) -> Manifest | None:
    """The manifest's head, None when the trial has none; ManifestInvalid when it is unusable."""
    try:
        data = storage.read(HEAD_KEY)
    except FileNotFoundError:
        return None
    return decode_head(data, storage.uri(HEAD_KEY))


def check_fresh(storage: Storage, m: Manifest) -> None:
    """One request: the last index file covered is still the one compacted. A trial rewritten
    or truncated after compaction (same out_dir reused) fails here."""
    if not m.chunks:
        return
    try:
        data = storage.read(m.last_key)
    except FileNotFoundError:
        raise ManifestInvalid(storage.uri(HEAD_KEY),
                              f"stale: {m.last_key} no longer exists") from None
    if zlib.crc32(data) != m.last_key_crc32:
        raise ManifestInvalid(storage.uri(HEAD_KEY), f"stale: {m.last_key} changed since it was"
                                                     " compacted")


# -- helpers ------------------------------------------------------------------------------

def _json_line(line: bytes, where: str, what: str) -> dict:
    try:
        doc = _loads(line)
    except ValueError as e:
        raise ManifestInvalid(where, f"{what} is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ManifestInvalid(where, f"{what} is not a JSON object")
    return doc


def _step_of(key: str, where: str) -> int:
    return _parse_key(key, where)[0]


def _parse_key(key: str, where: str) -> tuple[int, str]:
    parsed = parse_index_file_name(key)
    if parsed is None or not key.startswith(INDEX_DIR + "/") or ".." in key.split("/"):
        raise ManifestInvalid(where, f"{key!r} is not an index file name")
    return parsed
