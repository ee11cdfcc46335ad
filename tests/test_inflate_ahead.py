"""A large zlib section inflated ahead in a thread: the pieces are the data in order, every
failure reaches the caller (after the good pieces), a caller leaving early stops the thread,
and a compacted trial opened this way answers exactly as one inflated in one call."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
import zlib

import numpy as np
import pytest
from test_manifest import snapshot, write_steps

from smdebug_lite.format import inflate_ahead as ia
from smdebug_lite.format import manifest
from smdebug_lite.storage import open_storage
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of a few KB, so that a test-sized section comes out in many of them."""
    monkeypatch.setattr(ia, "AHEAD_MIN_BYTES", 1)
    monkeypatch.setattr(ia, "FIRST_PIECE", 1000)
    monkeypatch.setattr(ia, "PIECE", 4096)


def sample(n: int = 300_000) -> bytes:
    rng = np.random.default_rng(0)
    return rng.integers(0, 16, n, dtype=np.uint8).tobytes()  # compresses, but not to nothing


def inflater_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "smdebug-lite-inflate"]


def test_pieces_are_the_data_in_order(small_pieces):
    data = sample()
    pieces = list(ia.inflate_pieces(zlib.compress(data), len(data)))
    assert len(pieces) > 10 and len(pieces[0]) == 1000
    assert b"".join(pieces) == data


def test_a_small_section_is_inflated_in_one_call_without_a_thread():
    data = b"x" * 1000
    before = set(threading.enumerate())  # (threads of earlier tests may end meanwhile)
    assert list(ia.inflate_pieces(zlib.compress(data), 1 << 20)) == [data]
    assert not set(threading.enumerate()) - before


@pytest.mark.parametrize("damage", ["truncated", "garbage", "too large"])
def test_a_bad_section_raises_in_the_caller_after_the_good_pieces(small_pieces, damage):
    data = sample()
    packed, limit = zlib.compress(data), len(data)
    if damage == "truncated":
        packed = packed[: len(packed) // 2]
    elif damage == "garbage":
        packed = packed[:2000] + bytes(5000) + packed[7000:]
    else:
        limit = len(data) - 1
    got = []
    with pytest.raises(ia.InflateError, match="truncated or too large|not zlib data"):
        for piece in ia.inflate_pieces(packed, limit):
            got.append(piece)
    if damage != "garbage":  # (deflate finds damage late: what came out before may be wrong,
        assert data.startswith(b"".join(got))  # which is why a chunk's digest is checked first)


def test_a_caller_that_leaves_early_stops_the_thread(small_pieces):
    data = sample(2_000_000)
    pieces = ia.inflate_pieces(zlib.compress(data), len(data))
    assert next(pieces) == data[:1000]
    pieces.close()
    deadline = time.monotonic() + 10
    while inflater_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not inflater_threads()


def compacted(tmp_path, steps: int = 60):
    write_steps(tmp_path, range(steps), end=True)
    compact_trial(str(tmp_path), chunk_steps=steps)
    storage = open_storage(str(tmp_path))
    ref = manifest.read_head(storage).chunks[0]
    data = storage.read(ref.key)
    return storage, ref, data, manifest.decode_prefix(data[: ref.prefix], ref)


def test_records_inflated_ahead_are_those_of_one_inflate(tmp_path, small_pieces, monkeypatch):
    monkeypatch.setattr(manifest, "AHEAD_MIN_BYTES", 1)
    _, ref, data, cols = compacted(tmp_path)
    ahead = list(manifest.iter_docs(data, cols, ref, ahead=True))
    assert ahead == manifest.decode_docs(data, cols, ref)
    assert len(ahead) == ref.files == 120


def test_a_short_compacted_trial_opened_ahead_answers_like_its_files(tmp_path, small_pieces,
                                                                      monkeypatch):
    monkeypatch.setattr(manifest, "AHEAD_MIN_BYTES", 1)
    write_steps(tmp_path, range(60), end=True)
    expected = snapshot(create_trial(str(tmp_path), timeout=5))
    compact_trial(str(tmp_path), chunk_steps=25)
    t = create_trial(str(tmp_path), timeout=5)
    assert t.index_files_read == 0 and snapshot(t) == expected


def test_a_chunk_cut_short_after_its_digest_is_refused(tmp_path, small_pieces, monkeypatch):
    """A documents section that ends early (a compactor bug: the digest matches) is refused
    once its records run out, after the records before the cut."""
    monkeypatch.setattr(manifest, "AHEAD_MIN_BYTES", 1)
    _, ref, data, cols = compacted(tmp_path)
    start, size = cols.docs
    body = zlib.decompress(data[start:start + size])
    cut = zlib.compress(body[: len(body) * 2 // 3])
    forged = data[:start] + cut
    ref2 = dataclasses.replace(ref, nbytes=len(forged),
                               sha256=hashlib.sha256(forged).hexdigest())
    cols2 = dataclasses.replace(cols, docs=(start, len(cut)))
    got = []
    with pytest.raises(manifest.ManifestInvalid, match="truncated|no header line|records; the head says"):
        for record in manifest.iter_docs(forged, cols2, ref2, ahead=True):
            got.append(record)
    assert 0 < len(got) < ref.files
