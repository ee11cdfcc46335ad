"""Small values in the manifest's tensor sections: compaction keeps the values of raw tensors
up to `SMDEBUG_MANIFEST_VALUE_BYTES` (default 1,024) by tensor, and a trial whose chunks all
hold them opens without parsing any document and answers values, histories and reductions
(saved and computed) from the sections, exactly as its event files would; a larger tensor is
still read from its event files. Real PyTorch training, compacted at close; local and S3."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from test_trial_inline_values import answers, described, gets, without_manifest
from test_trial_inline_values import train as train_layers

from smdebug_lite.format import manifest
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import open_storage
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial

STEPS = 24
# 20 x 16 float32: 1,280 bytes, over the default 1,024
BIG = ("Sequential_0.weight", "gradient/Sequential_0.weight")


@pytest.fixture(autouse=True)
def compact_every_run(monkeypatch):
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
    for name in ("SMDEBUG_COMPACT", "SMDEBUG_MANIFEST_VALUE_BYTES",
                 "SMDEBUG_MANIFEST_PARSE_AT_OPEN_MB"):
        monkeypatch.delenv(name, raising=False)


def train(out_dir: str) -> None:
    """Real training: a weight over the limit (16 -> 20), small weights and biases, saved
    reductions of every tensor, the loss, and a few EVAL steps at the end."""
    train_layers(out_dir, STEPS, widths=(16, 20, 3, 1))


def sweep(t, names=None) -> dict:
    """What a rule reads step by step: every value and reduction (saved and computed, plain and
    abs) of every tensor (or of `names`), one call each, in both numberings."""
    out = {}
    for name in sorted(names or t.tensor_names()):
        tensor = t.tensor(name)
        for mode in (ModeKeys.GLOBAL, ModeKeys.TRAIN, ModeKeys.EVAL):
            for s in tensor.steps(mode=mode):
                out[f"{name}/{mode.name}/{s}"] = described(tensor.value(s, mode=mode))
                for red in ("mean", "max", "l2", "min", "std", "l1"):
                    for absolute in (False, True):
                        value = tensor.reduction_value(s, red, mode=mode, abs=absolute)
                        out[f"{name}/{mode.name}/{s}/{red}/{absolute}"] = (
                            type(value).__name__, described(value))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The run compacted at close, and the same trial without its manifest."""
    root = tmp_path_factory.mktemp("small_values")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
        train(str(root / "run"))
    return root / "run", without_manifest(root / "run", root / "plain")


def test_compaction_keeps_small_values_and_records_the_limit(runs, tmp_path):
    run, plain = runs
    head = manifest.read_head(open_storage(str(run)))
    assert head is not None and all(c.values == 1024 for c in head.chunks)
    again = compact_trial(str(without_manifest(run, tmp_path / "again")))
    assert again.values_kept > 0 and again.values_inlined > 0
    assert "small values" in str(again)


def test_sweeps_read_no_document_and_no_small_event_record(runs):
    run, plain = runs
    t = create_trial(str(run))
    seg = t.step_table.compacted
    assert seg is not None and not seg.parse_at_open  # opened on demand
    ref = create_trial(str(plain))
    small = [n for n in t.tensor_names() if n not in BIG]
    assert set(BIG) <= set(t.tensor_names()) and len(small) > 10
    assert sweep(t, small) == sweep(ref, small)
    assert seg.chunk_loads == 0 and t.event_file_reads == 0  # no document parsed, no record
    assert sweep(t, BIG) == sweep(ref, BIG)
    t2 = create_trial(str(run))
    for name in small:
        t2.tensor(name).values()
    assert t2.event_file_reads == 0
    t2.tensor(BIG[0]).values()  # over the limit: from its event files, steps' entries parsed
    assert t2.event_file_reads == STEPS
    assert t2.step_table.compacted.chunk_loads >= 1


def test_every_answer_matches_the_event_files(runs):
    run, plain = runs
    assert answers(create_trial(str(run))) == answers(create_trial(str(plain)))


def test_value_bytes_zero_keeps_one_element_values_only(runs, tmp_path, monkeypatch):
    run, plain = runs
    monkeypatch.setenv("SMDEBUG_MANIFEST_VALUE_BYTES", "0")
    copy = without_manifest(run, tmp_path / "scalars_only")
    result = compact_trial(str(copy))
    assert result.values_kept == 0 and result.values_inlined > 0
    t = create_trial(str(copy))
    # Chunks without the small values: a short trial is parsed whole when it opens, as before.
    assert t.step_table.compacted is None and t.index_files_read == 0
    assert sweep(t) == sweep(create_trial(str(plain)))


def test_a_sweep_on_s3_reads_each_chunk_s_sections_once(runs, s3_endpoint, s3_bucket):
    from test_s3_trial import upload_dir

    run, plain = runs
    uri = upload_dir(s3_endpoint.client(), run, s3_bucket, "runs/small")
    t = create_trial(uri)
    seg = t.step_table.compacted
    before = gets(t)
    small = sorted(n for n in t.tensor_names() if n not in BIG)
    got = {n: {s: described(t.tensor(n).value(s)) for s in t.tensor(n).steps()} for n in small}
    for n in small:
        for s in t.tensor(n).steps():
            t.tensor(n).reduction_value(s, "std")
    ref = create_trial(str(plain))
    assert got == {n: {s: described(ref.tensor(n).value(s)) for s in ref.tensor(n).steps()}
                   for n in small}
    assert gets(t) - before == len(seg.refs)  # one ranged GET per chunk, no event file
    assert t.event_file_reads == 0 and seg.chunk_loads == 0


def test_a_section_that_does_not_list_saved_reductions_leaves_them_to_the_documents():
    """Sections written by an earlier release do not say which reductions the chunk saved:
    then no reduction is computed from them (a saved one may exist)."""
    meta = {"groups": [["<f4", "2", 1]]}
    body = json.dumps(meta).encode() + b"\n" + np.array([0], "<i4").tobytes() \
        + np.array([1.5, 2.5], "<f4").tobytes()
    data = zlib.compress(body)
    ref = manifest.ChunkRef("manifest/chunks/x.zz", 0, 0, 1, "", 0)
    column = manifest.decode_tensor_section(data, {"w": (0, len(data), zlib.crc32(data))}, "w",
                                            ref)
    assert column.reduced is None
    meta["reduced"] = [["mean", False]]
    body = json.dumps(meta).encode() + body[body.index(b"\n"):]
    data = zlib.compress(body)
    column = manifest.decode_tensor_section(data, {"w": (0, len(data), zlib.crc32(data))}, "w",
                                            ref)
    assert column.reduced == {("mean", False)}


def test_a_damaged_section_is_reported_once_and_the_answers_stay(runs, tmp_path, caplog):
    import logging
    import shutil

    run, plain = runs
    copy = tmp_path / "damaged"
    shutil.copytree(run, copy)
    t = create_trial(str(copy))
    seg = t.step_table.compacted
    name = "Sequential_2.bias"
    chunk = copy / seg.refs[0].key
    columns = manifest.decode_prefix(chunk.read_bytes()[:seg.refs[0].prefix], seg.refs[0])
    offset, size, _ = columns.tensors[name]
    data = bytearray(chunk.read_bytes())
    data[offset + size // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    t = create_trial(str(copy))
    ref = create_trial(str(plain))
    with caplog.at_level(logging.WARNING):
        assert sweep(t, [name]) == sweep(ref, [name])
    said = [r for r in caplog.records if "Not using the section" in r.getMessage()]
    assert len(said) == 1 and name in said[0].getMessage()


def test_a_head_with_a_bad_values_key_is_not_used(runs, tmp_path, caplog):
    """The per-chunk limit is read from the head; a value that is not a number makes the
    head malformed: a warning names it, the per-step files answer, nothing is lost."""
    import hashlib
    import logging
    import shutil

    run, plain = runs
    copy = tmp_path / "bad_head"
    shutil.copytree(run, copy)
    head = copy / manifest.HEAD_KEY
    doc = json.loads(head.read_bytes().split(b"\n")[0])
    doc["chunks"][0]["values"] = "lots"
    line = json.dumps(doc, sort_keys=True).encode()
    head.write_bytes(line + b"\n" + hashlib.sha256(line).hexdigest().encode() + b"\n")
    with caplog.at_level(logging.WARNING):
        t = create_trial(str(copy))
    assert "malformed head" in caplog.text and "'lots'" in caplog.text
    assert t.step_table.compacted is None and t.index_files_read == STEPS
    assert answers(t) == answers(create_trial(str(plain)))


def test_a_bad_value_bytes_setting_is_named_and_the_default_used(runs, tmp_path, monkeypatch,
                                                                 caplog):
    import logging

    run, _ = runs
    monkeypatch.setenv("SMDEBUG_MANIFEST_VALUE_BYTES", "-5")
    with caplog.at_level(logging.WARNING):
        result = compact_trial(str(without_manifest(run, tmp_path / "bad_env")))
    assert "SMDEBUG_MANIFEST_VALUE_BYTES='-5'" in caplog.text
    assert result.values_kept > 0  # the default, 1,024 bytes
