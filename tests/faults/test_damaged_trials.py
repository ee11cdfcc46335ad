"""Hand-damaged trial files: copies of the golden trials smdebug 1.0.34 wrote and of a trial our
PyTorch hook writes, with one index file truncated, emptied, replaced by garbage or by JSON
nested 100,000 deep, an index entry without a key or with impossible offsets, or an event file
gone. Each read raises our exception (IndexFileCorrupted, TensorCorrupted, EventFileMissing)
naming the file and the step, never a bare KeyError/TypeError/RecursionError or "not saved";
every other step (and every other tensor of the damaged step, when only an entry is damaged)
reads as from the undamaged copy."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR

from smdebug_lite.config.reductions import REDUCTIONS_PREFIX, parse_reduction_tensor_name
from smdebug_lite.exceptions import (
    EventFileMissing,
    IndexFileCorrupted,
    IndexReaderException,
    StepUnavailable,
    TensorCorrupted,
    TensorUnavailableForStep,
)
from smdebug_lite.format.inline_value import INLINE_KEY, decode_inline
from smdebug_lite.trials import create_trial

DAMAGED_STEP = {"pt_basic": 3, "pt_reductions": 6, "hook": 3}


@pytest.fixture(scope="module")
def hook_trial(tmp_path_factory) -> Path:
    """A trial written by our PyTorch hook: 6 TRAIN steps then 2 EVAL steps, every step saved."""
    pytest.importorskip("torch")
    from _pytorch_support import write_hook_trial

    return write_hook_trial(tmp_path_factory.mktemp("hook") / "run", 6, 2)


def source(kind: str, hook_trial: Path) -> Path:
    return hook_trial if kind == "hook" else GOLDEN_DIR / kind


def copy_of(kind: str, hook_trial: Path, tmp_path: Path) -> Path:
    root = tmp_path / kind
    shutil.copytree(source(kind, hook_trial), root)
    return root


def index_path(root: Path, step: int) -> Path:
    return root / "index" / "000000000" / f"{step:012d}_worker_0.json"


def event_path(root: Path, step: int) -> Path:
    return root / "events" / f"{step:012d}" / f"{step:012d}_worker_0.tfevents"


def snapshot(trial) -> dict:
    """Every raw value and saved reduction, by (tensor, step)."""
    out = {}
    for name in trial.tensor_names():
        t = trial.tensor(name)
        for step in t.steps():
            try:
                out[(name, step)] = np.array(t.value(step))
            except TensorUnavailableForStep:  # only reductions were saved
                out[(name, step)] = {k: float(v) for k, v in t.reduction_values(step).items()}
    return out


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
    return a == b


def assert_names_file_and_step(exc: BaseException, file_name: str, step: int) -> None:
    msg = str(exc)
    assert file_name in msg, msg
    assert f"step {step}" in msg, msg


WHOLE_FILE_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "garbage": lambda b: bytes(random.Random(5).randrange(256) for _ in range(len(b))),
    "deep_json": lambda b: b"[" * 100_000 + b"]" * 100_000,
    "deep_unclosed": lambda b: b'{"meta": ' + b"[" * 100_000,
    "no_meta": lambda b: json.dumps({"tensor_payload": json.loads(b)["tensor_payload"]}).encode(),
    "bad_mode": lambda b: b.replace(b'"mode": "', b'"mode": "X', 1),
    "no_tensorname": lambda b: b.replace(b'"tensorname"', b'"name"', 1),
    "name_not_text": lambda b: json.dumps(
        {**json.loads(b), "tensor_payload": [{**e, "tensorname": 7} for e in
                                             json.loads(b)["tensor_payload"]]}).encode(),
    "event_file_outside": lambda b: json.dumps(
        {**json.loads(b), "meta": {**json.loads(b)["meta"],
                                   "event_file_name": "../../../etc/passwd"}}).encode(),
    "not_an_object": lambda b: b"[1, 2, 3]",
}


@pytest.mark.parametrize("kind", ["pt_basic", "pt_reductions", "hook"])
@pytest.mark.parametrize("damage", sorted(WHOLE_FILE_DAMAGE))
def test_damaged_index_file(kind, damage, hook_trial, tmp_path):
    clean_trial = create_trial(str(source(kind, hook_trial)))
    clean = snapshot(clean_trial)
    root = copy_of(kind, hook_trial, tmp_path)
    step = DAMAGED_STEP[kind]
    path = index_path(root, step)
    path.write_bytes(WHOLE_FILE_DAMAGE[damage](path.read_bytes()))

    trial = create_trial(str(root))  # one damaged file does not take the trial down
    assert step not in trial.steps()
    # Every other step reads as before.
    got = snapshot(trial)
    assert {k for k in clean if k[1] != step} == set(got)
    for k, v in got.items():
        assert same(v, clean[k]), k
    # Asking for the damaged step names the file, the step and what is wrong.
    name = next(n for n, s in clean if s == step)
    tensor = trial.tensor(name)
    for ask in (lambda: tensor.value(step), lambda: tensor.reduction_value(step, "max"),
                lambda: tensor.shape(step), lambda: tensor.workers(step),
                lambda: trial.tensor_names(step=step), lambda: trial.wait_for_steps([step]),
                lambda: tensor.value(step, worker="worker_0")):
        with pytest.raises(IndexFileCorrupted) as e:
            ask()
        assert_names_file_and_step(e.value, str(path), step)
        assert isinstance(e.value, IndexReaderException) and e.value.step == step
    # The same step asked by its mode step (the damaged file's mode is unknown: the step lies
    # between the mode's neighbouring steps).
    mode, mode_step = clean_trial.mode_modestep(step)
    with pytest.raises(IndexFileCorrupted) as e:
        tensor.value(mode_step, mode=mode)
    assert_names_file_and_step(e.value, str(path), step)
    # A step that was never saved is still reported as such.
    with pytest.raises((StepUnavailable, TensorUnavailableForStep)):
        tensor.value(10_000)


ENTRY_DAMAGE: dict[str, tuple[Callable[[dict], None], type[Exception], str]] = {
    "no_start_idx": (lambda e: e.pop("start_idx"), IndexFileCorrupted, "start_idx"),
    "no_length": (lambda e: e.pop("length"), IndexFileCorrupted, "length"),
    "negative_start": (lambda e: e.update(start_idx=-40), IndexFileCorrupted, "start_idx=-40"),
    "start_is_text": (lambda e: e.update(start_idx="12"), IndexFileCorrupted, "start_idx='12'"),
    "start_is_float": (lambda e: e.update(start_idx=1.5), IndexFileCorrupted, "start_idx=1.5"),
    "start_is_null": (lambda e: e.update(start_idx=None), IndexFileCorrupted, "start_idx=None"),
    "length_is_list": (lambda e: e.update(length=[3]), IndexFileCorrupted, "length=[3]"),
    "length_too_small": (lambda e: e.update(length=3), IndexFileCorrupted, "length=3"),
    "start_past_the_end": (lambda e: e.update(start_idx=10**12), TensorCorrupted, "truncated"),
    "length_past_the_end": (lambda e: e.update(length=10**15), TensorCorrupted, "truncated"),
    "crc_is_text": (lambda e: e.update(crc32c="x"), IndexFileCorrupted, "crc32c='x'"),
}
OURS_ONLY = {
    "offset_negative": (lambda e: e.update(content_offset=-1), IndexFileCorrupted,
                        "content_offset=-1"),
    "shape_nested": (lambda e: e.update(shape=[[2], 3]), IndexFileCorrupted, "shape"),
    "dtype_unknown": (lambda e: e.update(dtype=["<f4"]), IndexFileCorrupted, "dtype"),
}
READ_PATHS = ["single", "after_whole_file", "ranged", "bulk"]


def entry_cases():
    for kind in ("pt_basic", "pt_reductions", "hook"):
        for damage in sorted(ENTRY_DAMAGE) + (sorted(OURS_ONLY) if kind == "hook" else []):
            for read in READ_PATHS:
                yield kind, damage, read


@pytest.mark.parametrize(("kind", "damage", "read"), list(entry_cases()))
def test_damaged_index_entry(kind, damage, read, hook_trial, tmp_path, monkeypatch):
    if read == "ranged":
        monkeypatch.setenv("SMDEBUG_READER_WHOLE_FILE_MB", "0")
    clean = snapshot(create_trial(str(source(kind, hook_trial))))
    root = copy_of(kind, hook_trial, tmp_path)
    step = DAMAGED_STEP[kind]
    path = index_path(root, step)
    doc = json.loads(path.read_text())
    entries = doc["tensor_payload"]
    victim = entries[len(entries) // 2]
    mutate, expected, words = {**ENTRY_DAMAGE, **OURS_ONLY}[damage]
    if damage == "dtype_unknown" and "dtype" not in victim:
        pytest.skip("no dtype recorded for this entry")
    mutate(victim)
    path.write_text(json.dumps(doc))
    full_name = victim["tensorname"]
    reduction = full_name.startswith(REDUCTIONS_PREFIX)
    name = parse_reduction_tensor_name(full_name)[0] if reduction else full_name

    trial = create_trial(str(root))
    assert step in trial.steps()
    tensor = trial.tensor(name)
    if reduction:  # a saved reduction: ask for it
        _, red, is_abs = parse_reduction_tensor_name(full_name)
        ask = lambda: tensor.reduction_value(step, red, abs=is_abs)  # noqa: E731
    else:
        ask = lambda: tensor.value(step)  # noqa: E731
    if read == "after_whole_file":  # the step's file is read for another record first
        other = next((e["tensorname"] for e in entries if e is not victim), None)
        if other is not None and other.startswith(REDUCTIONS_PREFIX):
            base, r, a = parse_reduction_tensor_name(other)
            trial.tensor(base).reduction_value(step, r, abs=a)
        elif other is not None:
            trial.tensor(other).value(step)
    if read == "bulk" and full_name == name:
        ask = lambda: tensor.values()  # noqa: E731
    if INLINE_KEY in victim and expected is TensorCorrupted:
        # Only the event file could show this damage, and a value inlined in a sound entry
        # is not read from it (docs/differences.md): the value is the one written.
        got = ask()
        value = got[step] if isinstance(got, dict) else got
        assert np.asarray(value).tobytes() == decode_inline(victim[INLINE_KEY]).tobytes()
        return
    with pytest.raises(expected) as e:
        ask()
    file_named = str(path) if expected is IndexFileCorrupted else str(event_path(root, step))
    assert_names_file_and_step(e.value, file_named, step)
    assert words in str(e.value), str(e.value)
    # The same tensor at other steps and the step's other tensors read as before.
    got = snapshot_except(trial, name, step)
    for k, v in got.items():
        assert same(v, clean[k]), k


def snapshot_except(trial, skipped: str, step: int) -> dict:
    out = {}
    for name in trial.tensor_names():
        t = trial.tensor(name)
        for s in t.steps():
            if s == step and name == skipped:
                continue
            try:
                out[(name, s)] = np.array(t.value(s))
            except TensorUnavailableForStep:
                out[(name, s)] = {k: float(v) for k, v in t.reduction_values(s).items()}
    return out


@pytest.mark.parametrize("kind", ["pt_basic", "hook"])
def test_missing_event_file(kind, hook_trial, tmp_path):
    root = copy_of(kind, hook_trial, tmp_path)
    step = DAMAGED_STEP[kind]
    gone = event_path(root, step)
    gone.unlink()
    trial = create_trial(str(root))
    payload = json.loads(index_path(root, step).read_text())["tensor_payload"]
    inlined = {e["tensorname"] for e in payload if INLINE_KEY in e}
    names = trial.tensor_names(step=step)
    name = next(n for n in names if n not in inlined)
    for n in set(names) & inlined:  # read from its index entry: the event file is not needed
        assert trial.tensor(n).value(step) is not None
    for ask in (lambda: trial.tensor(name).value(step), lambda: trial.tensor(name).values()):
        with pytest.raises(EventFileMissing) as e:
            ask()
        assert isinstance(e.value, TensorCorrupted)
        assert not isinstance(e.value, TensorUnavailableForStep)  # not "was not saved"
        assert_names_file_and_step(e.value, str(gone), step)
        assert str(index_path(root, step)) in str(e.value)
    assert trial.tensor(name).value(step + 1) is not None


def test_damaged_collections_file_is_named(tmp_path):
    root = copy_of("pt_basic", None, tmp_path)  # type: ignore[arg-type]
    coll = next((root / "collections").rglob("*.json"))
    coll.write_bytes(b"[" * 100_000)
    from smdebug_lite.exceptions import CollectionsFileDamaged, SMDebugValueError

    with pytest.raises(CollectionsFileDamaged) as e:
        create_trial(str(root), timeout=5)
    assert str(coll) in str(e.value) and "nested more than" in str(e.value)
    assert isinstance(e.value, SMDebugValueError)
    coll.write_text('{"collections": {}}')
    with pytest.raises(CollectionsFileDamaged) as e:
        create_trial(str(root), timeout=5)
    assert "_meta" in str(e.value)


def test_damage_with_two_workers_counts_the_step_as_written(tmp_path):
    """A damaged index file of one worker: the other worker's values at that step read, the
    damaged worker's raise, and the step does not stay incomplete."""
    from trial_builders import open_writer, simple_tensors, write_steps

    out = tmp_path / "two"
    writers = [open_writer(str(out), f"worker_{i}", num_workers=2) for i in range(2)]
    for w in writers:
        write_steps(w, range(4), simple_tensors)
        w.close()
    path = out / "index" / "000000000" / "000000000002_worker_1.json"
    path.write_bytes(b"{")
    trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 2, 3] and trial.loaded_all_steps
    np.testing.assert_array_equal(trial.tensor("w").value(2), simple_tensors(2)["w"])
    with pytest.raises(IndexFileCorrupted) as e:
        trial.tensor("w").value(2, worker="worker_1")
    assert_names_file_and_step(e.value, str(path), 2)
    assert "worker_1" in str(e.value)


def test_missing_event_file_wait_is_bounded_by_the_trial_timeout(tmp_path, monkeypatch):
    """While training runs, an event file the index lists may still come: the wait for it ends
    at the trial's timeout (not after SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT polls) with a
    TrialDataTimeout naming the trial and the file."""
    from trial_builders import write_job

    from smdebug_lite.exceptions import TrialDataTimeout

    monkeypatch.setenv("SMDEBUG_TRIAL_POLL_INTERVAL", "0.05")
    monkeypatch.setenv("SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT", "1000000")
    out = tmp_path / "live"
    writer = write_job(str(out), range(3), close=False)  # no end marker: training goes on
    event_path(out, 2).unlink()
    trial = create_trial(str(out), timeout=0.5)
    with pytest.raises(TrialDataTimeout) as e:
        trial.tensor("w").value(2)
    msg = str(e.value)
    assert str(out) in msg and "event file events/000000000002/" in msg and "step 2" in msg
    writer.close()


def test_bounded_json():
    from smdebug_lite.exceptions import JSONFileRejected
    from smdebug_lite.format import bounded_json

    loads = bounded_json.loads
    assert loads(b"[" * 64 + b"]" * 64, "ok.json") is not None
    for text in (b"[" * 65 + b"]" * 65, b'{"a": ' * 65 + b"1" + b"}" * 65, b"[" * 100_000):
        with pytest.raises(JSONFileRejected) as e:
            loads(text, "deep.json")
        assert str(e.value).startswith("deep.json: JSON nested more than 64 levels")
    # Brackets inside strings (escaped quotes too) are not nesting.
    assert loads(b'["' + b"[" * 500 + b'", "\\"[[[[", 1]', "s.json")[2] == 1
    assert loads(b'{"a": NaN}', "nan.json")["a"] != 0  # the json fallback still parses NaN
    # The fallback (json recurses per level) is reached only through the iterative scan, even
    # when the caller skips it for the fast parser.
    with pytest.raises(JSONFileRejected):
        loads(b"[" * 100_000 + b"NaN" + b"]" * 100_000, "nan_deep.json", scan_depth=False)
    with pytest.raises(JSONFileRejected, match="big.json: 9 bytes is over the 8-byte limit"):
        loads(b"[1, 2, 3]", "big.json", max_bytes=8)
    with pytest.raises(JSONFileRejected, match="empty.json: the file is empty"):
        loads(b"", "empty.json")
    assert bounded_json.nesting_depth(b'{"a": [1, {"b": []}]}') == 4
    assert bounded_json.nesting_depth(b'[[], [[]], {}]') == 3
