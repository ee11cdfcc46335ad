"""The compacted index of a trial: the per-step index files packed into a few chunk objects.

Opening a long trial from S3 costs one GET per index file (steps x workers). A manifest holds
the same index documents, byte for byte, in one zlib-compressed chunk per `CHUNK_STEPS` steps,
plus the values of scalar records (saved reductions, one-element tensors) inlined, so a reader
makes O(chunks) requests. The per-step files stay where they are: smdebug 1.0.34 never looks
under `manifest/`, and a reader falls back to them whenever the manifest fails a check.

Layout (see docs/format.md, "Compacted index"):

* `manifest/manifest.json`: the head, a JSON line then the SHA-256 of that line. It lists the
  chunks (key, step range, number of index documents, SHA-256, size) and the last index file
  covered with the CRC32 of its bytes. Written last, atomically: it is the commit point.
* `manifest/chunks/<first>-<last>-<sha12>.zz`: zlib of a header line, then per index document a
  JSON line {"key", "len", "crc32", "inline"} followed by `len` raw bytes and a newline. Named by
  content, so a chunk is never rewritten in place while someone reads it.

Nothing here is trusted: every check failure raises `ManifestInvalid`, which readers log as a
warning before reading the per-step files instead.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from smdebug_lite.format.locations import INDEX_DIR, parse_index_file_name
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
VERSION = 1
CHUNK_STEPS = 1000  # steps per chunk: 100 chunks for a 100k-step trial
INLINE_KEY = "inline"  # the entry key a manifest adds: the record's value, see `inline_value`
_MAX_HEAD_BYTES = 64 * 1024 * 1024
_MAX_CHUNK_BYTES = 4 * 1024 * 1024 * 1024


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

    def to_json(self) -> dict:
        return {"key": self.key, "first_step": self.first_step, "last_step": self.last_step,
                "files": self.files, "sha256": self.sha256, "bytes": self.nbytes}


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
    decoded (-1 and "" before)."""

    key: str
    raw: bytes
    inline: dict[str, str] = field(default_factory=dict)
    step: int = -1
    worker: str = ""


# -- inline values ------------------------------------------------------------------------

def encode_inline(arr: np.ndarray) -> str | None:
    """'<dtype>|<dims>|<hex of the bytes>' for a one-element numeric array, else None. The
    bytes are kept as they are, so the value (NaN payloads included) comes back identical."""
    if arr.size != 1 or arr.dtype.kind not in "biufc" or arr.dtype.hasobject:
        return None
    dims = ",".join(str(d) for d in arr.shape)
    return f"{arr.dtype.str}|{dims}|{np.ascontiguousarray(arr).tobytes().hex()}"


def decode_inline(text: str) -> np.ndarray:
    """The array `encode_inline` described; ValueError names what is wrong."""
    try:
        dtype, dims, data = text.rsplit("|", 2)  # "|b1": a dtype may hold the separator
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        arr = np.frombuffer(bytes.fromhex(data), dtype=np.dtype(dtype))
        return arr.reshape(shape)
    except (ValueError, TypeError) as e:
        raise ValueError(f"inline value {text!r} is not '<dtype>|<dims>|<hex>' ({e})") from None


def inline_value(entry: dict) -> np.ndarray | None:
    """The value a manifest inlined in an index entry (a read-only array), or None when it did
    not: then the value is read from the event file as usual."""
    text = entry.get(INLINE_KEY)
    if text is None or text.__class__ is not str:
        return None
    try:
        return decode_inline(text)
    except ValueError:
        return None


def attach_inline(entries: Sequence[dict], inline: dict[str, str]) -> None:
    """Put inlined values into the index entries they belong to (matched by tensor name)."""
    for e in entries:
        text = inline.get(e.get("tensorname"))  # type: ignore[arg-type]
        if text.__class__ is str:
            e[INLINE_KEY] = text


# -- chunks -------------------------------------------------------------------------------

def encode_chunk(records: Sequence[IndexRecord]) -> tuple[bytes, int, int]:
    """(compressed chunk, first step, last step) of records given in key order."""
    steps = [_step_of(r.key, "record") for r in records]
    header = {"format": CHUNK_FORMAT, "version": VERSION, "first_step": min(steps),
              "last_step": max(steps), "files": len(records)}
    parts = [json.dumps(header).encode(), b"\n"]
    for r in records:
        meta = {"key": r.key, "len": len(r.raw), "crc32": zlib.crc32(r.raw)}
        if r.inline:
            meta["inline"] = r.inline
        parts += [json.dumps(meta, separators=(",", ":")).encode(), b"\n", r.raw, b"\n"]
    return zlib.compress(b"".join(parts), 6), header["first_step"], header["last_step"]


def chunk_key(first: int, last: int, sha256: str) -> str:
    return f"{CHUNK_DIR}/{first:012d}-{last:012d}-{sha256[:12]}.zz"


def write_chunk(storage: Storage, records: Sequence[IndexRecord]) -> ChunkRef:
    data, first, last = encode_chunk(records)
    digest = hashlib.sha256(data).hexdigest()
    key = chunk_key(first, last, digest)
    storage.write_atomic(key, data)
    return ChunkRef(key, first, last, len(records), digest, len(data))


def decode_chunk(data: bytes, ref: ChunkRef) -> list[IndexRecord]:
    """The records of a chunk, after checking its digest, header and every record's CRC and
    step against what the head says."""
    where = ref.key
    if len(data) != ref.nbytes:
        raise ManifestInvalid(where, f"{len(data)} bytes; the head says {ref.nbytes}")
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ManifestInvalid(where, "SHA-256 differs from the head's (damaged or replaced)")
    try:
        body = zlib.decompress(data)
    except zlib.error as e:
        raise ManifestInvalid(where, f"not zlib data ({e})") from None
    pos = body.find(b"\n")
    header = _json_line(body[:pos] if pos >= 0 else b"", where, "header")
    expect = {"format": CHUNK_FORMAT, "version": VERSION, "first_step": ref.first_step,
              "last_step": ref.last_step, "files": ref.files}
    for k, v in expect.items():
        if header.get(k) != v:
            raise ManifestInvalid(where, f"header {k}={header.get(k)!r}; expected {v!r}")
    pos += 1
    out: list[IndexRecord] = []
    previous = ""
    first, last = ref.first_step, ref.last_step
    find, crc32, size = body.find, zlib.crc32, len(body)
    while pos < size:
        end = find(b"\n", pos)
        if end < 0:
            raise ManifestInvalid(where, f"record {len(out)} has no header line")
        meta = _json_line(body[pos:end], where, f"record {len(out)}")
        key, n, crc = meta.get("key"), meta.get("len"), meta.get("crc32")
        if not isinstance(key, str) or not isinstance(n, int) or not isinstance(crc, int) \
                or n < 0:
            raise ManifestInvalid(where, f"record {len(out)} header {meta!r} lacks key/len/crc32")
        raw = body[end + 1:end + 1 + n]
        if len(raw) != n or body[end + 1 + n:end + 2 + n] != b"\n":
            raise ManifestInvalid(where, f"record {key} is truncated")
        if crc32(raw) != crc:
            raise ManifestInvalid(where, f"record {key}: CRC32 mismatch")
        step, worker = _parse_key(key, where)
        if not first <= step <= last:
            raise ManifestInvalid(where, f"record {key} is outside steps "
                                         f"{ref.first_step}..{ref.last_step}")
        if key <= previous:
            raise ManifestInvalid(where, f"record {key} is out of key order")
        inline = meta.get("inline") or {}
        if not isinstance(inline, dict):
            raise ManifestInvalid(where, f"record {key}: inline is not an object")
        out.append(IndexRecord(key, raw, inline, step, worker))
        previous = key
        pos = end + 2 + n
    if len(out) != ref.files:
        raise ManifestInvalid(where, f"{len(out)} records; the head says {ref.files}")
    return out


def fetch_chunks(storage: Storage, refs: Sequence[ChunkRef]) -> list[bytes]:
    """Every chunk as stored (compressed), downloaded concurrently (one GET each on S3).
    Decoding them one at a time (`decode_chunk`) keeps one chunk's records in memory, not
    the whole trial's index text."""
    try:
        return list(storage.read_many([r.key for r in refs]))
    except FileNotFoundError as e:
        raise ManifestInvalid(str(e), "a chunk the head lists is missing") from None


def read_chunks(storage: Storage, refs: Sequence[ChunkRef]) -> list[list[IndexRecord]]:
    """Every chunk's records, downloaded concurrently (one GET each on S3)."""
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
    if doc.get("format") != HEAD_FORMAT or doc.get("version") != VERSION:
        raise ManifestInvalid(where, f"format {doc.get('format')!r} version "
                                     f"{doc.get('version')!r}; expected {HEAD_FORMAT!r} {VERSION}")
    try:
        chunks = [ChunkRef(str(c["key"]), int(c["first_step"]), int(c["last_step"]),
                           int(c["files"]), str(c["sha256"]), int(c["bytes"]))
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
                or c.nbytes > _MAX_CHUNK_BYTES:
            raise ManifestInvalid(where, f"chunk {c.key} has steps {c.first_step}..{c.last_step}"
                                         " overlapping or out of order")
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


def write_head(storage: Storage, m: Manifest) -> None:
    storage.write_atomic(HEAD_KEY, encode_head(m))


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
