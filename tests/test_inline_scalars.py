"""One-element values written into their index entries: exactly the record's value, read back
without opening an event file, ignored (the record read instead) when the text is damaged."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from trial_builders import open_writer, write_steps

from smdebug_lite.format.inline_value import INLINE_KEY, decode_inline, inline_for_record
from smdebug_lite.trials import create_trial

STEPS = range(30)
NAN_WITH_PAYLOAD = np.array([0x7FC00123], dtype=np.uint32).view(np.float32).reshape(())


def tensors(s: int) -> dict[str, np.ndarray]:
    return {
        "loss": np.array(1.0 / (s + 1), dtype=np.float32),
        "count": np.array([s], dtype=np.int64),  # shape (1,)
        "flag": np.array(s % 2 == 0),
        "nan": NAN_WITH_PAYLOAD,
        "pair": np.array([s, s + 1], dtype=np.float64),  # two elements: not inlined
        "half": np.array(s / 7, dtype=ml_dtypes.bfloat16),  # stored widened: not inlined
        "word": np.array("w"),
    }


def entries(root: Path, step: int) -> dict[str, dict]:
    doc = json.loads((root / "index" / "000000000" / f"{step:012d}_worker_0.json").read_text())
    return {e["tensorname"]: e for e in doc["tensor_payload"]}


@pytest.fixture
def job(tmp_path) -> Path:
    root = tmp_path / "job"
    w = open_writer(str(root))
    write_steps(w, STEPS, tensors)
    w.close()
    return root


def test_one_element_values_are_in_their_entries_exactly(job):
    for s in (0, 7, 29):
        found = entries(job, s)
        assert {n for n, e in found.items() if INLINE_KEY in e} == {"loss", "count", "flag", "nan"}
        for name in ("loss", "count", "flag", "nan"):
            back = decode_inline(found[name][INLINE_KEY])
            expected = tensors(s)[name]
            assert back.dtype == expected.dtype and back.shape == expected.shape
            assert back.tobytes() == expected.tobytes()  # the NaN's payload too


def test_a_scalar_history_opens_no_event_file(job):
    t = create_trial(str(job))
    for name in ("loss", "count", "flag", "nan"):
        history = t.tensor(name).values()
        assert sorted(history) == list(STEPS)
        for s in STEPS:
            assert history[s].tobytes() == tensors(s)[name].tobytes()
            assert history[s].shape == tensors(s)[name].shape
    assert t._values.range_reads == 0 and t._values.file_reads == 0
    assert t._values.inline_reads == 4 * len(STEPS)
    # Values that are not inlined are read from their records as before.
    assert t.tensor("pair").value(3).tolist() == [3.0, 4.0]
    assert t.tensor("half").value(7) == np.float32(tensors(7)["half"])  # (widened: docs/format.md)
    assert t._values.range_reads + t._values.file_reads > 0


@pytest.mark.parametrize("text", [
    "<f4||zz",  # not hex
    f"<f8||{np.float64(9).tobytes().hex()}",  # well formed, but not the entry's dtype
    f"<f4|1|{np.float32(9).tobytes().hex()}",  # nor its shape
])
def test_inline_text_that_does_not_fit_its_entry_falls_back_to_the_record(job, text):
    path = job / "index" / "000000000" / f"{5:012d}_worker_0.json"
    doc = json.loads(path.read_text())
    for e in doc["tensor_payload"]:
        if e["tensorname"] == "loss":
            e[INLINE_KEY] = text
    path.write_text(json.dumps(doc))
    t = create_trial(str(job))
    assert float(t.tensor("loss").value(5)) == pytest.approx(1 / 6)
    assert float(t.tensor("loss").values()[5]) == pytest.approx(1 / 6)
    assert t._values.range_reads + t._values.file_reads >= 1


def test_a_damaged_entry_is_reported_although_its_value_is_inlined(job):
    from smdebug_lite.exceptions import IndexFileCorrupted

    path = job / "index" / "000000000" / f"{5:012d}_worker_0.json"
    doc = json.loads(path.read_text())
    for e in doc["tensor_payload"]:
        if e["tensorname"] == "loss":
            e["start_idx"] = "twelve"
    path.write_text(json.dumps(doc))
    with pytest.raises(IndexFileCorrupted) as e:
        create_trial(str(job)).tensor("loss").value(5)
    assert "start_idx='twelve'" in str(e.value) and e.value.step == 5


def test_only_values_stored_as_they_are():
    scalar = np.float32(2.5)
    assert decode_inline(inline_for_record(scalar, "<f4", None)).item() == 2.5
    assert inline_for_record(np.array(1.0, dtype=">f4"), "<f4", None) is None  # byte-swapped
    assert inline_for_record(np.array(1, dtype=np.int8), "<i4", "int8") is None  # widened
    assert inline_for_record(np.zeros(2, dtype=np.float32), "<f4", None) is None
    assert inline_for_record(1.0, "<f8", None) is None  # not an array: the record decides


@pytest.mark.parametrize("parse_at_open", ["256", "0"])
def test_compaction_does_not_repeat_what_the_entries_carry(job, monkeypatch, parse_at_open):
    """The manifest's record headers leave out values the entries already hold; opened whole
    or on demand, the compacted trial still answers every value from the index (the tensor
    sections hold them all)."""
    from smdebug_lite.format import manifest
    from smdebug_lite.storage import open_storage
    from smdebug_lite.writer.compaction import compact_trial

    compact_trial(str(job))
    storage = open_storage(str(job))
    head = manifest.read_head(storage)
    records = [r for ref in head.chunks for r in manifest.decode_chunk(storage.read(ref.key), ref)]
    # (only "half", stored widened, is inlined by compaction and not by the writer)
    assert len(records) == len(STEPS) and all(set(r.inline) == {"half"} for r in records)
    monkeypatch.setenv("SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB", parse_at_open)
    t = create_trial(str(job))
    for name in ("loss", "count", "flag", "nan"):
        history = t.tensor(name).values()
        for s in STEPS:
            assert history[s].tobytes() == tensors(s)[name].tobytes()
    assert t._values.range_reads == 0 and t._values.file_reads == 0
