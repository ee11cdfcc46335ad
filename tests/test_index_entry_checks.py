"""Index entries are checked against their records before their fields are trusted.

smdebug-lite's entries give each record's dtype, shape and tensor bytes' offset, and readers view
those bytes in place. A damaged entry (a bit flip in a shape, another dtype, an offset or a
name) must never give a wrong array: every read either returns exactly what was written or
raises an error naming the damaged step's index or event file. Trials are written with the
writer API; smdebug-written golden trials (entries of name, start and length only) are damaged
too. Reads go through every path: single values (the whole file, or ranged), bulk `values()`,
computed reductions, step-by-step loops, local and S3, uncompacted and compacted.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from test_s3_trial import upload_dir
from trial_builders import write_job

from smdebug_lite.exceptions import (
    IndexFileCorrupted,
    SMDebugError,
    StepUnavailable,
    TensorCorrupted,
    TensorUnavailableForStep,
)
from smdebug_lite.format.entry_check import entry_agrees, expected_head
from smdebug_lite.format.inline_value import INLINE_KEY
from smdebug_lite.format.tensor_codec import encode_tensor_record, tensor_head, to_storable
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial

STEPS = range(12)


def tensors_at(s: int) -> dict[str, np.ndarray]:
    """Tensors of every layout the writer gives entries for; "w" and "g" have records of the
    same length, so an offset moved from one to the other still frames a valid record."""
    return {
        "w": np.arange(64, dtype=np.float32).reshape(4, 16) + s,
        "g": np.arange(64, dtype=np.float32).reshape(4, 16) * -(s + 1),
        "b": np.linspace(0, 1, 16) + s,
        "n": (np.arange(6) - s).astype(np.int8),  # stored as int32 (orig_dtype)
        "k": np.arange(4, dtype=np.int64).reshape(2, 2) * s,
        "u": np.arange(5, dtype=np.uint8) + s,
        "m": np.array([True, s % 2 == 0, False]),
        "e": np.zeros((0, 3), dtype=np.float32),
        "loss": np.array(1.0 / (s + 1), dtype=np.float32),  # inlined in its entry
    }


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("written") / "trial"
    write_job(str(root), STEPS, tensors_at)
    return root


def index_path(root: Path, step: int) -> Path:
    return root / "index" / "000000000" / f"{step:012d}_worker_0.json"


def event_path(root: Path, step: int) -> Path:
    return root / "events" / f"{step:012d}" / f"{step:012d}_worker_0.tfevents"


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def names_the_file(exc: BaseException, root: Path, step: int) -> bool:
    msg = str(exc)
    return (str(index_path(root, step)) in msg or str(event_path(root, step)) in msg) \
        and f"step {step}" in msg


def damage_entry(root: Path, step: int, name: str, mutate: Callable[[dict, list], None]) -> None:
    path = index_path(root, step)
    doc = json.loads(path.read_text())
    entries = doc["tensor_payload"]
    mutate(next(e for e in entries if e["tensorname"] == name), entries)
    path.write_text(json.dumps(doc))


# -- the expected bytes before a record's tensor bytes ---------------------------------------

@pytest.mark.parametrize("tag", ["w", "layer.0/weight:0", "ü" * 70, "x" * 300])
@pytest.mark.parametrize("value", [
    np.float32(2.5), np.zeros((0, 3), np.float32), np.arange(64, dtype=np.float32).reshape(4, 16),
    np.arange(5000, dtype=np.float64), np.arange(6, dtype=np.int8), np.array([True, False]),
    np.arange(4, dtype=np.uint64).reshape(2, 2), np.ones((3, 200, 2), np.float16),
    np.arange(3, dtype=np.complex64), np.arange(7, dtype=np.uint32),
])
def test_tensor_head_is_what_the_encoder_writes(tag, value):
    rec = encode_tensor_record(tag, value, step=300, mode_value=1, mode_step=7, wall_time=1.5)
    data = b"".join(bytes(c) for c in rec.chunks)
    stored = to_storable(value)
    nbytes = stored.array.nbytes
    head = tensor_head(tag, stored.proto_dtype, rec.shape, nbytes)
    assert data[rec.content_offset - len(head) : rec.content_offset] == head
    assert expected_head(tag, rec.stored_dtype, rec.shape) == (head, nbytes)
    entry = {"tensorname": tag, "start_idx": 0, "length": rec.length, "dtype": rec.stored_dtype,
             "shape": list(rec.shape), "content_offset": rec.content_offset}
    assert entry_agrees(data, 0, {**entry, "shape": json.dumps(list(rec.shape))})
    for bad in ({"tensorname": tag + "x"}, {"content_offset": rec.content_offset - 1},
                {"content_offset": rec.content_offset + 1}, {"shape": [*rec.shape, 1]},
                {"dtype": "<f4" if rec.stored_dtype != "<f4" else "<i4"}, {"length": 40}):
        assert not entry_agrees(data, 0, {**entry, **bad}), bad


# -- each field damaged, each read path ------------------------------------------------------

FIELD_DAMAGE: dict[str, Callable[[dict, list], None]] = {
    "shape_grows": lambda e, _: e.update(shape=[4, 36]),
    "shape_shrinks": lambda e, _: e.update(shape=[4, 6]),
    "shape_transposed": lambda e, _: e.update(shape=[16, 4]),
    "shape_rank": lambda e, _: e.update(shape=[4, 16, 1]),
    "dtype_same_size": lambda e, _: e.update(dtype="<i4"),
    "dtype_wider": lambda e, _: e.update(dtype="<f8"),
    "dtype_narrower": lambda e, _: e.update(dtype="<f2"),
    "start_on_other_record": lambda e, es: e.update(
        start_idx=next(o for o in es if o["tensorname"] == "g")["start_idx"]),
    "start_plus_one": lambda e, _: e.update(start_idx=e["start_idx"] + 1),
    "length_minus_four": lambda e, _: e.update(length=e["length"] - 4),
    "length_plus_eight": lambda e, _: e.update(length=e["length"] + 8),
    "name_of_other": lambda e, _: e.update(tensorname="w"),  # (of "g", listed after "w")
    "offset_minus_one": lambda e, _: e.update(content_offset=e["content_offset"] - 1),
    "offset_plus_four": lambda e, _: e.update(content_offset=e["content_offset"] + 4),
    "orig_dtype_narrower": lambda e, _: e.update(orig_dtype="uint8"),
    "orig_dtype_float": lambda e, _: e.update(orig_dtype="float16"),
}
PATHS = ["single", "ranged", "after_whole_file", "bulk", "reduction", "loop"]


def read_victim(trial, name: str, step: int, path: str):
    """The victim's value at `step` by one read path (a reduction: its mean)."""
    t = trial.tensor(name)
    if path == "after_whole_file":
        trial.tensor("b").value(step)
    if path == "bulk":
        return t.values()[step]
    if path == "reduction":
        return t.reduction_value(step, "mean")
    if path == "loop":
        out = None
        for s in t.steps():
            v = t.value(s)
            if s == step:
                out = v
        return out
    return t.value(step)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("damage", sorted(FIELD_DAMAGE))
def test_each_damaged_field_raises_naming_the_index_file(written, tmp_path, monkeypatch,
                                                         damage, path):
    if path == "ranged":
        monkeypatch.setenv("SMDEBUG_READER_WHOLE_FILE_MB", "0")
    root = tmp_path / "t"
    shutil.copytree(written, root)
    step = 5
    victim = {"orig_dtype_narrower": "n", "orig_dtype_float": "n", "name_of_other": "g"}.get(
        damage, "w")
    damage_entry(root, step, victim, FIELD_DAMAGE[damage])
    trial = create_trial(str(root))
    with pytest.raises((IndexFileCorrupted, TensorCorrupted)) as e:
        read_victim(trial, "w" if damage == "name_of_other" else victim, step, path)
    assert names_the_file(e.value, root, step), str(e.value)
    if not damage.startswith("start"):
        # What the entry and its intact record disagree on is the index file's damage. (An
        # entry moved elsewhere fails the CRC32C of the bytes it points at first: the event
        # file is named, as for a damaged record.)
        assert isinstance(e.value, IndexFileCorrupted), str(e.value)
        assert str(index_path(root, step)) in str(e.value)
    # Every other step of the tensor, and the other tensors of the step, read as written.
    clean = tensors_at(step)
    for name in ("b", "k", "u", "m", "loss"):
        assert same(trial.tensor(name).value(step), clean[name])
    for s in STEPS:
        if s != step:
            assert same(trial.tensor(victim).value(s), tensors_at(s)[victim])


@pytest.mark.parametrize("warm", [False, True])
def test_shape_and_dtype_answer_from_an_entry_only_when_it_agrees(written, tmp_path, warm):
    """`shape()`/`dtype()` answer from the entry, without the value, only when the bytes
    before its record's tensor bytes agree with it; otherwise the record is read, which names
    the damage. `warm`: the step's file is in memory already."""
    root = tmp_path / "t"
    shutil.copytree(written, root)
    damages = {3: ("w", FIELD_DAMAGE["shape_shrinks"]), 4: ("b", lambda e, _: e.update(dtype="<i8")),
               5: ("n", FIELD_DAMAGE["orig_dtype_float"]), 6: ("w", FIELD_DAMAGE["shape_grows"]),
               7: ("u", lambda e, _: e.update(dtype="|i1"))}
    for step, (name, mutate) in damages.items():
        damage_entry(root, step, name, mutate)
    trial = create_trial(str(root))
    counted = trial._values
    for step, (name, _) in damages.items():
        if warm:
            trial.tensor("k").value(step)
        t, clean = trial.tensor(name), tensors_at(step)[name]
        for what, ask, right in (("shape", t.shape, clean.shape),
                                 ("dtype", t.dtype, clean.dtype.name)):
            try:
                got = ask(step)
            except IndexFileCorrupted as e:
                assert names_the_file(e, root, step), str(e)
                continue
            # Only what the damage left alone may answer (the shape of a wrong orig_dtype).
            assert (what, name) == ("shape", "n") and got == right, (what, name, got)
    reads = counted.range_reads + counted.file_reads
    assert trial.tensor("w").shape(2) == (4, 16) and trial.tensor("n").dtype(2) == "int8"
    assert counted.range_reads + counted.file_reads == reads + 2  # a few bytes each, no value
    assert counted.bytes_read < 10_000


def test_shapes_check_their_entries_in_one_batch(written, tmp_path):
    trial = create_trial(str(written))
    reader = trial._values
    calls = []
    real = reader.storage.read_ranges
    reader.storage.read_ranges = lambda *a: calls.append(len(a[0])) or real(*a)
    assert trial.tensor("w").shapes() == {s: (4, 16) for s in STEPS}
    assert trial.tensor("w").shape(3) == (4, 16) and trial.tensor("b").dtype(3) == "float64"
    assert calls == [len(STEPS), 1] and reader.file_reads == 0 and reader.bytes_read < 2000
    assert trial.tensor("w").shapes() == {s: (4, 16) for s in STEPS} and len(calls) == 2
    root = tmp_path / "t"
    shutil.copytree(written, root)
    damage_entry(root, 7, "w", FIELD_DAMAGE["shape_transposed"])
    with pytest.raises(IndexFileCorrupted) as e:
        create_trial(str(root)).tensor("w").shapes()
    assert names_the_file(e.value, root, 7)


def test_smdebug_written_entry_pointing_at_another_record(tmp_path):
    """smdebug's entries give a record's place only; the record's tag must be the entry's
    name. An entry moved onto another tensor's record is found out on every path: whole file
    (the record decoded and named), bulk and ranged (the record read at the entry's length)."""
    root = tmp_path / "pt_basic"
    shutil.copytree(GOLDEN_DIR / "pt_basic", root)
    clean = create_trial(str(GOLDEN_DIR / "pt_basic"))
    weight, other = "Sequential_0.weight", "gradient/Sequential_0.weight"
    step = 4
    damage_entry(root, step, weight, lambda e, es: e.update(
        start_idx=next(o for o in es if o["tensorname"] == other)["start_idx"]))
    trial = create_trial(str(root))
    with pytest.raises(IndexFileCorrupted) as e:
        trial.tensor(weight).value(step)
    assert names_the_file(e.value, root, step) and repr(other) in str(e.value)
    for ask in (lambda t: t.tensor(weight).values(),
                lambda t: [t.tensor(other).values(), t.tensor(weight).values()]):
        with pytest.raises((IndexFileCorrupted, TensorCorrupted)) as e:
            ask(create_trial(str(root)))
        assert names_the_file(e.value, root, step)
    # Same length, another name: the tag alone tells them apart.
    damage_entry(root, step + 1, "Sequential_2.bias", lambda e, _: e.update(
        tensorname="Sequential_2.bias_"))
    trial = create_trial(str(root))
    for ask in (lambda t: t.tensor("Sequential_2.bias_").value(step + 1),
                lambda t: t.tensor("Sequential_2.bias_").values()):
        with pytest.raises(IndexFileCorrupted, match="'Sequential_2.bias'"):
            ask(trial)
    assert same(trial.tensor(weight).value(step + 1), clean.tensor(weight).value(step + 1))


def test_damaged_entries_on_s3(written, tmp_path, s3_endpoint, s3_bucket):
    root = tmp_path / "t"
    shutil.copytree(written, root)
    damage_entry(root, 2, "w", FIELD_DAMAGE["shape_shrinks"])
    damage_entry(root, 3, "w", FIELD_DAMAGE["offset_plus_four"])
    damage_entry(root, 4, "b", lambda e, _: e.update(dtype="<i8"))
    uri = upload_dir(s3_endpoint.client(), root, s3_bucket, "damaged")
    for ask, step in ((lambda t: t.tensor("w").value(2), 2), (lambda t: t.tensor("w").values(), 2),
                      (lambda t: t.tensor("w").value(3), 3), (lambda t: t.tensor("b").values(), 4),
                      (lambda t: t.tensor("b").reduction_value(4, "max"), 4)):
        trial = create_trial(uri)
        with pytest.raises(IndexFileCorrupted) as e:
            ask(trial)
        assert f"step {step}" in str(e.value) and f"{step:012d}_worker_0.json" in str(e.value)
    trial = create_trial(uri)
    for s in (0, 1, 5):
        assert same(trial.tensor("w").value(s), tensors_at(s)["w"])


# -- randomized: any single-field damage, any read path ---------------------------------------

DTYPE_NAMES = ["<f4", "<i4", "<f8", "<i8", "<f2", "|u1", "|b1", "<c16", "|i1", "<u8", "<u4",
               "<i2", "<c8"]


def random_damage(rng: random.Random, e: dict, entries: list) -> str:
    """Damage one field of entry `e` at random (in place); what was done."""
    ints = [k for k in ("start_idx", "length", "content_offset", "crc32c") if k in e]
    choices = ["flip_int", "start", "length", "name"]
    if "shape" in e:
        choices += ["shape", "shape_flip", "dtype", "offset"]
    kind = rng.choice(choices)
    others = [o for o in entries if o is not e]
    if kind == "flip_int":
        k = rng.choice(ints + (["shape"] if e.get("shape") else []))
        if k == "shape":
            i = rng.randrange(len(e["shape"]))
            e["shape"][i] ^= 1 << rng.randrange(6)
        else:
            e[k] ^= 1 << rng.randrange(24 if k != "crc32c" else 32)
    elif kind == "start":
        e["start_idx"] = rng.choice(others)["start_idx"] if others and rng.random() < 0.5 \
            else max(0, e["start_idx"] + rng.choice([-1, 1]) * rng.randrange(1, 64))
    elif kind == "length":
        e["length"] = rng.choice(others)["length"] if others and rng.random() < 0.5 \
            else max(16, e["length"] + rng.choice([-1, 1]) * rng.randrange(1, 64))
    elif kind == "name":
        e["tensorname"] = rng.choice(others)["tensorname"] if others and rng.random() < 0.5 \
            else e["tensorname"] + rng.choice(["x", "_1", "0"])
    elif kind == "shape":
        shape = list(e["shape"])
        op = rng.randrange(3)
        if op == 0 and shape:
            shape[rng.randrange(len(shape))] += rng.choice([-3, -1, 1, 2, 20])
        elif op == 1:
            shape.insert(rng.randrange(len(shape) + 1), rng.choice([1, 2]))
        elif shape:
            shape.pop(rng.randrange(len(shape)))
        e["shape"] = [max(0, d) for d in shape]
    elif kind == "shape_flip":
        text = json.dumps(e["shape"])
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        if digits:
            i = rng.choice(digits)
            text = text[:i] + str((int(text[i]) + rng.randrange(1, 10)) % 10) + text[i + 1:]
        e["shape"] = json.loads(text)
    elif kind == "dtype":
        e["dtype"] = rng.choice([d for d in DTYPE_NAMES if d != e["dtype"]])
    else:
        e["content_offset"] += rng.choice([-1, 1]) * rng.randrange(1, 48)
    return kind


def reads(trial, path: str) -> dict:
    """{(tensor, step): value or the exception} over the whole trial by one read path."""
    out: dict = {}
    for name in trial.tensor_names():
        t = trial.tensor(name)
        steps = t.steps()
        if path == "bulk":
            try:
                out.update({(name, s): v for s, v in t.values().items()})
                continue
            except SMDebugError as e:  # the damaged step's: then each step alone
                out[(name, "bulk")] = e
        for s in steps:
            try:
                if path == "after_whole_file":
                    trial.tensor("b" if "b" in trial.tensor_names() else name).value(s)
                out[(name, s)] = (t.reduction_value(s, "mean") if path == "reduction"
                                  else t.value(s))
            except SMDebugError as e:
                out[(name, s)] = e
    return out


def check_exact_or_named(got: dict, clean: dict, root: Path, step: int, renamed: tuple) -> None:
    for key, value in got.items():
        name, s = key
        if isinstance(value, Exception):
            assert s in (step, "bulk"), (key, value)
            assert names_the_file(value, root, step), (key, value)
            continue
        if key in clean:
            assert same(value, clean[key]), (key, value, clean[key])
        else:  # a name only the damage made: its value cannot be right
            pytest.fail(f"{key} answered {value!r}, though it was never written")
    for key in set(clean) - set(got):
        # Only the damaged step can lose a value, by a renamed entry (the step then no longer
        # lists the tensor at all, as if it had not been saved there).
        assert key[1] == step and key[0] in renamed, key


def damaged_copy(src: Path, dst: Path, rng: random.Random, step: int,
                 inline_too: bool) -> tuple[str, str, str]:
    shutil.copytree(src, dst)
    path = index_path(dst, step)
    doc = json.loads(path.read_text())
    entries = doc["tensor_payload"]
    pool = [e for e in entries if inline_too or INLINE_KEY not in e]
    e = rng.choice(pool)
    name = e["tensorname"]
    kind = random_damage(rng, e, entries)
    if kind == "name" and INLINE_KEY in e:
        e.pop(INLINE_KEY)  # see test_renamed_inline_value below
    path.write_text(json.dumps(doc))
    return name, kind, e["tensorname"]


def clean_values(trial, path: str) -> dict:
    return {k: v for k, v in reads(trial, path).items()}


@pytest.mark.parametrize("variant", ["plain", "compacted_after_damage",
                                     "compacted_before_damage", "golden"])
def test_random_single_field_damage_exact_or_named(written, tmp_path, monkeypatch, variant):
    rng = random.Random(f"entry-damage-{variant}")
    src = GOLDEN_DIR / "pt_basic" if variant == "golden" else written
    if variant == "compacted_before_damage":
        src = tmp_path / "compacted"
        shutil.copytree(written, src)
        compact_trial(str(src))
    clean = {path: clean_values(create_trial(str(src)), path) for path in PATHS
             if path not in ("ranged", "loop")}
    clean["ranged"] = clean["loop"] = clean["single"]
    runs = 40 if variant == "golden" else 60
    for i in range(runs):
        path = rng.choice(PATHS)
        monkeypatch.setenv("SMDEBUG_READER_WHOLE_FILE_MB", "0" if path == "ranged" else "8")
        # "single": each value read alone; "loop": read ahead; the others either way.
        monkeypatch.setenv("SMDEBUG_READER_AHEAD_STEPS", "0" if path == "single" else
                           "128" if path == "loop" else rng.choice(["0", "4", "128"]))
        step = rng.choice([2, 3, 7, 11]) if variant != "golden" else rng.choice([3, 9, 14])
        root = tmp_path / f"run{i}"
        name, kind, new_name = damaged_copy(src, root, rng, step, inline_too=True)
        if variant == "compacted_after_damage":
            compact_trial(str(root))
        got = reads(create_trial(str(root)), "single" if path == "loop" else path)
        check_exact_or_named(got, clean[path], root, step, (name,) if new_name != name else ())
        shutil.rmtree(root)


def test_renamed_inline_value(written, tmp_path):
    """The one damage no read can see: a scalar's value inlined in its entry, under a damaged
    name, is answered from the entry without its record (docs/format.md). Its record, read
    without the inlined text, names the damage."""
    root = tmp_path / "t"
    shutil.copytree(written, root)
    damage_entry(root, 6, "loss", lambda e, _: e.update(tensorname="lossx"))
    trial = create_trial(str(root))
    assert same(trial.tensor("lossx").value(6), tensors_at(6)["loss"])
    with pytest.raises((TensorUnavailableForStep, StepUnavailable)):
        trial.tensor("loss").value(6)
    damage_entry(root, 6, "lossx", lambda e, _: e.pop(INLINE_KEY))
    trial = create_trial(str(root))
    with pytest.raises(IndexFileCorrupted, match="'loss'"):
        trial.tensor("lossx").value(6)
