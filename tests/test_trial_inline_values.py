"""Scalars a manifest inlined are answered from the index: the same values, dtypes and shapes
as the event files give, with no event file read (local) and no GET of one (S3).

Golden smdebug-written trials compacted with `compact_trial`, and trials written by the
PyTorch hook during real training (compacted at close), each compared with the same trial
without its manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import GOLDEN_DIR
from test_s3_trial import upload_dir
from torch import nn

import smdebug_lite.pytorch as smd
from smdebug_lite.format import manifest
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial
from smdebug_lite.writer.compaction import compact_trial

GOLDEN = sorted(p.name for p in GOLDEN_DIR.iterdir() if (p / "index").is_dir())
MODES = (ModeKeys.GLOBAL, ModeKeys.TRAIN, ModeKeys.EVAL)



def described(arr: np.ndarray) -> tuple:
    a = np.asarray(arr)
    return a.dtype.str, a.shape, a.tobytes()


def guarded(fn):
    try:
        return fn()
    except Exception as e:  # an error is an answer too: both trials must give the same
        return ("error", type(e).__name__)


def answers(t) -> dict:
    """Values (one by one and in bulk), saved and computed reductions, shapes and dtypes of
    every tensor at every step, worker and mode."""
    out: dict = {"names": sorted(t.tensor_names()), "steps": t.steps()}
    for name in out["names"]:
        tensor = t.tensor(name)
        for mode in MODES:
            bulk = guarded(lambda tensor=tensor, mode=mode: {
                s: described(v) for s, v in tensor.values(mode=mode).items()})
            out[f"{name}/values/{mode.name}"] = bulk
        for s in tensor.steps():
            for w in tensor.workers(s):
                key = f"{name}/{s}/{w}"
                out[key] = guarded(lambda tensor=tensor, s=s, w=w: described(
                    tensor.value(s, worker=w)))
                out[key + "/shape"] = guarded(lambda tensor=tensor, s=s, w=w:
                                              tensor.shape(s, worker=w))
                out[key + "/dtype"] = guarded(lambda tensor=tensor, s=s, w=w:
                                              tensor.dtype(s, worker=w))
                out[key + "/saved"] = guarded(lambda tensor=tensor, s=s, w=w: {
                    k: described(v) for k, v in tensor.reduction_values(s, worker=w).items()})
                for red in ("mean", "max", "l2"):
                    out[f"{key}/{red}"] = guarded(lambda tensor=tensor, s=s, w=w, red=red:
                                                  described(tensor.reduction_value(s, red,
                                                                                   worker=w)))
    return out


def scalar_names(t) -> list[str]:
    """Tensors whose every raw value has one element."""
    names = []
    for name in t.tensor_names():
        values = guarded(lambda name=name: t.tensor(name).values())
        if isinstance(values, dict) and values and all(v.size == 1 for v in values.values()):
            names.append(name)
    return sorted(names)


def saved_reductions(t) -> list[tuple[str, int, tuple[str, bool]]]:
    return [(n, s, k) for n in t.tensor_names() for s in t.tensor(n).steps()
            for k in t.tensor(n).reduction_values(s)]


def scalar_reads(t, names: list[str], reductions: list) -> dict:
    """Every scalar's history (bulk and one by one) and every saved reduction."""
    out = {}
    for n in names:
        tensor = t.tensor(n)
        out[n] = {s: described(v) for s, v in tensor.values().items()}
        out[n + "/each"] = {s: described(tensor.value(s)) for s in tensor.steps()}
    for n, s, (red, absolute) in reductions:
        out[f"{n}/{s}/{red}/{absolute}"] = described(
            t.tensor(n).reduction_value(s, red, abs=absolute))
    return out


def gets(t) -> int:
    return t.storage.request_counts.get("GET", 0)


# -- golden smdebug-written trials ----------------------------------------------------------

@pytest.mark.parametrize("name", GOLDEN)
def test_golden_compacted_answers_identically_and_reads_no_event_file_for_scalars(tmp_path,
                                                                                  name):
    path = tmp_path / name
    shutil.copytree(GOLDEN_DIR / name, path)
    assert compact_trial(str(path)).values_inlined > 0
    plain = create_trial(str(GOLDEN_DIR / name))
    assert answers(create_trial(str(path))) == answers(plain)

    names, reductions = scalar_names(plain), saved_reductions(plain)
    assert names  # every golden trial saves a loss
    if name == "pt_reductions":
        assert reductions
    expected = scalar_reads(plain, names, reductions)
    assert plain.event_file_reads > 0
    # Without its event files the compacted trial still answers every scalar: from the index.
    shutil.rmtree(path / "events")
    compacted = create_trial(str(path))
    assert compacted.index_files_read == 0
    assert scalar_reads(compacted, names, reductions) == expected
    assert compacted.event_file_reads == 0


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_compacted_on_s3_makes_no_event_file_get_for_scalars(s3_endpoint, s3_bucket,
                                                                     name):
    uri = upload_dir(s3_endpoint.client(), GOLDEN_DIR / name, s3_bucket, f"runs/{name}")
    local = create_trial(str(GOLDEN_DIR / name))
    names, reductions = scalar_names(local), saved_reductions(local)
    plain = create_trial(uri)
    before = gets(plain)
    expected = scalar_reads(plain, names, reductions)
    assert gets(plain) > before  # uncompacted: one ranged GET per record (or file)
    assert compact_trial(uri).values_inlined > 0
    compacted = create_trial(uri)
    assert compacted.index_files_read == 0
    before = gets(compacted)
    assert scalar_reads(compacted, names, reductions) == expected
    # No event file read: only the manifest's chunks, once each for the steps' documents and
    # a ranged GET of each history's tensor section.
    # (A trial this short is parsed whole at open: then no GET at all.)
    seg = compacted.step_table.compacted
    chunks = 0 if seg is None else len(seg.refs)
    assert gets(compacted) - before <= chunks * (1 + len(names))
    assert compacted.event_file_reads == 0
    assert answers(compacted) == answers(local)


# -- trials written by the PyTorch hook -------------------------------------------------------

def train(out_dir: str, steps: int = 24, widths: tuple[int, ...] = (4, 3, 1)) -> None:
    """Real training with saved reductions, raw weights, one-element biases and the loss: a
    stack of linear layers (ReLU between them) of these widths, input first; the last 4 steps
    evaluate."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = smd.Hook(out_dir, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients", "losses"],
                    reduction_config=smd.ReductionConfig(reductions=["mean", "max"],
                                                         norms=["l2"], save_raw_tensor=True))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for step in range(steps):
        evaluating = step >= steps - 4
        if step == steps - 4:
            hook.set_mode(smd.modes.EVAL)
        x = torch.randn(8, widths[0])
        loss = loss_fn(model(x), x.sum(dim=1, keepdim=True))
        if not evaluating:
            opt.zero_grad()
            loss.backward()
            opt.step()
    hook.close()
    smd.del_hook()


def without_manifest(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(manifest.MANIFEST_DIR))
    return dst


@pytest.fixture
def compact_every_run(monkeypatch):
    monkeypatch.setenv("SMDEBUG_COMPACT_MIN_FILES", "0")
    monkeypatch.delenv("SMDEBUG_COMPACT", raising=False)


def test_torch_trial_compacted_at_close_answers_identically(tmp_path, compact_every_run):
    out = tmp_path / "run"
    train(str(out))
    assert (out / manifest.HEAD_KEY).exists()
    plain = create_trial(str(without_manifest(out, tmp_path / "plain")))
    compacted = create_trial(str(out))
    assert compacted.index_files_read == 0 and plain.index_files_read == 24
    assert answers(compacted) == answers(plain)

    names, reductions = scalar_names(plain), saved_reductions(plain)
    assert {"MSELoss_output_0", "Sequential_2.bias"} <= set(names) and reductions
    expected = scalar_reads(plain, names, reductions)
    shutil.rmtree(out / "events")
    compacted = create_trial(str(out))
    assert scalar_reads(compacted, names, reductions) == expected
    assert compacted.event_file_reads == 0


def test_torch_trial_on_s3_compacted_at_close(tmp_path, s3_endpoint, s3_bucket,
                                              compact_every_run):
    uri = f"s3://{s3_bucket}/jobs/run"
    train(uri)
    local = tmp_path / "local"
    train(str(local))  # the same run, seeded, written locally
    plain = create_trial(str(without_manifest(local, tmp_path / "plain")))
    compacted = create_trial(uri)
    assert compacted.index_files_read == 0 and compacted.storage.request_counts.get("GET", 0) < 8
    names, reductions = scalar_names(plain), saved_reductions(plain)
    expected = scalar_reads(plain, names, reductions)
    before = gets(compacted)
    assert scalar_reads(compacted, names, reductions) == expected
    seg = compacted.step_table.compacted  # see the golden test above
    chunks = 0 if seg is None else len(seg.refs)
    assert gets(compacted) - before <= chunks * (1 + len(names))
    assert compacted.event_file_reads == 0
    assert answers(compacted) == answers(plain)


# -- a trial compacted mid-run, then appended to ---------------------------------------------

def test_steps_after_the_manifest_come_from_event_files(tmp_path):
    from test_manifest import write_steps

    path = tmp_path / "t"
    write_steps(path, range(12))
    assert compact_trial(str(path)).values_inlined > 0
    write_steps(path, range(12, 20), end=True)
    plain = create_trial(str(without_manifest(path, tmp_path / "plain")))
    mixed = create_trial(str(path))
    assert mixed.index_files_read == 16  # 8 steps x 2 workers after the manifest
    assert answers(mixed) == answers(plain)
    fresh = create_trial(str(path))
    loss = fresh.tensor("loss").values(worker="worker_1")
    assert sorted(loss) == list(range(20))
    # Steps 12..19 of worker_1 only: the manifest answers the first twelve.
    assert fresh.event_file_reads == 8
    assert {s: described(v) for s, v in loss.items()} == {
        s: described(v) for s, v in plain.tensor("loss").values(worker="worker_1").items()}


def test_every_stored_dtype_comes_back_as_the_event_file_gives_it(tmp_path):
    """Narrowed dtypes (bfloat16, int8, uint32 ...) and odd shapes of one element: the inlined
    value matches the decoded record in dtype, shape and bytes; Tensor.dtype is unchanged."""
    import ml_dtypes

    from smdebug_lite.config import CollectionManager
    from smdebug_lite.writer import ThreadTrialWriter

    def value(name: str, step: int) -> np.ndarray:
        kind, shape = name.split("_")
        dims = tuple(int(d) for d in shape.split("x") if d)
        x = np.full(dims, step - 3.25)
        if kind == "bfloat16":
            return x.astype(ml_dtypes.bfloat16)
        if kind == "bool":
            return x > 0
        return x.astype(kind)

    names = ["float16_", "bfloat16_1", "int8_1x1", "uint16_", "uint32_1", "int64_1x1x1",
             "bool_", "complex64_1", "float64_", "float32_2", "float32_300"]  # 2 not scalars
    path = tmp_path / "dtypes"
    w = ThreadTrialWriter(str(path))
    w.write_collections(CollectionManager(framework="pytorch").export())
    for s in range(6):
        sw = w.new_step(s, ModeKeys.TRAIN, s)
        for n in names:
            sw.add_tensor(n, value(n, s))
        w.submit(sw)
    w.close()
    plain = create_trial(str(without_manifest(path, tmp_path / "plain")))
    assert compact_trial(str(path)).values_inlined == 9 * 6
    compacted = create_trial(str(path))
    assert answers(compacted) == answers(plain)
    assert compacted.tensor("bfloat16_1").dtype(0) == "bfloat16"
    fresh = create_trial(str(path))
    for n in names[:-2]:
        got = fresh.tensor(n).values()
        assert {s: described(v) for s, v in got.items()} == {
            s: described(v) for s, v in plain.tensor(n).values().items()}
        assert {s: fresh.tensor(n).value(s).dtype for s in got} == {
            s: v.dtype for s, v in got.items()}
    assert fresh.event_file_reads == 0
    # A small value (8 bytes) is kept in the tensor's section too; a larger one (1,200 bytes,
    # over SMDEBUG_MANIFEST_VALUE_BYTES' 1,024) is read from its event files.
    small = fresh.tensor("float32_2").values()
    assert {s: described(v) for s, v in small.items()} == {
        s: described(v) for s, v in plain.tensor("float32_2").values().items()}
    assert fresh.event_file_reads == 0
    fresh.tensor(names[-1]).values()
    assert fresh.event_file_reads == 6
