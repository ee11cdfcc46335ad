"""Trial and Tensor API on out_dirs written by our TrialWriter: every method, every dtype,
missing vs future steps, modes, reductions, range_steps, bad input."""

from __future__ import annotations

import json
import os
import time

import ml_dtypes
import numpy as np
import pytest
from trial_builders import open_writer, simple_tensors, write_job, write_steps

import smdebug_lite.exceptions as ex
from smdebug_lite.analysis.utils import no_refresh, parse_bool, refresh
from smdebug_lite.format.locations import END_OF_JOB_FILE
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import LocalTrial, StepState, Tensor, create_trial

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def rich_tensors(s: int) -> dict[str, np.ndarray]:
    return {
        "Net_fc.weight": W + s,
        "Net_fc.bias": np.arange(3, dtype=np.float64) - s,
        "gradient/Net_fc.weight": W * -s,
        "CrossEntropyLoss_output_0": np.array(2.0 / (s + 1), dtype=np.float32),
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "u16": np.array([0, 65535], dtype=np.uint16),
        "bf": np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16),
        "flag": np.array([True, False]),
        "big": np.arange(2 * 3 * 4, dtype=np.int64).reshape(2, 3, 4) * s,
        "labels": np.array([s, s + 1]),
        "predictions_0": np.array([0.5 * s]),
        "predictions_1": np.array([1.5 * s]),
        "fc_input_1": np.array([1.0]),
        "fc_input_0": np.array([0.0]),
        "smdebug/reductions/mean/Net_fc.weight": np.array((W + s).mean(), dtype=np.float32),
        "smdebug/reductions/abs_l2/Net_fc.weight": np.array(
            np.linalg.norm(np.abs(W + s).ravel()), dtype=np.float32),
        "smdebug/reductions/max/reduced_only": np.array(float(s), dtype=np.float32),
    }


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> LocalTrial:
    """TRAIN steps 0-5 (mode steps 0-5), then EVAL global steps 6-8 (mode steps 0-2)."""
    out = str(tmp_path_factory.mktemp("rich") / "job")
    w = open_writer(out)
    write_steps(w, range(6), rich_tensors, TRAIN, shapes_at=lambda s: {"shape_only": (s, 2)})
    write_steps(w, range(6, 9), lambda s: {k: v for k, v in rich_tensors(s).items()
                                           if not k.startswith("gradient")},
                EVAL, mode_step=lambda s: s - 6)
    w.close()
    return create_trial(out)


def test_trial_level_api(rich):
    t = rich
    assert t.name == "job" and t.path.endswith("job") and isinstance(t, LocalTrial)
    assert t.loaded_all_steps and t.last_complete_step == 8 and t.num_workers == 1
    assert "smdebug/reductions/mean/Net_fc.weight" not in t.tensor_names()
    assert "reduced_only" in t.tensor_names() and "shape_only" in t.tensor_names()
    assert t.tensors() == t.tensor_names()
    assert t.steps() == list(range(9))
    assert t.steps(TRAIN) == list(range(6)) and t.steps(EVAL) == [0, 1, 2]
    assert t.steps("EVAL") == [0, 1, 2] and t.steps(ModeKeys.PREDICT) == []
    assert t.modes() == [TRAIN, EVAL]
    assert t.mode(7) is EVAL and t.mode_step(7) == 1 and t.mode_modestep(2) == (TRAIN, 2)
    assert t.mode_modestep(99) == (None, None)
    assert t.global_step(EVAL, 2) == 8 and t.global_step(GLOBAL, 5) == 5
    assert t.global_step(EVAL, 9) is None
    assert t.workers() == ["worker_0"]
    assert {"weights", "biases", "gradients", "losses", "all", "default"} <= set(t.collections())
    assert t.collection("weights").include_regex == ["^(?!gradient).*weight"]
    assert t.tensor_names(collection="weights") == ["Net_fc.weight"]
    assert t.tensor_names(collection=t.collection("losses")) == ["CrossEntropyLoss_output_0"]
    assert t.tensor_names(regex=["^i8$", "u16"]) == ["i8", "u16"]
    assert t.tensor_names(step=1, mode=EVAL, regex="gradient") == []
    assert "gradient/Net_fc.weight" in t.tensor_names(step=1, mode=TRAIN)
    assert "gradient/Net_fc.weight" not in t.tensor_names(mode=EVAL)
    assert t.tensor_names(step=50) == []
    assert t.has_tensor("i8") and not t.has_tensor("nope")
    assert t.has_passed_step(3) is StepState.AVAILABLE
    assert t.has_passed_step(9) is StepState.UNAVAILABLE
    assert [v.tolist() for v in t.labels(3)] == [[3, 4]]
    assert [v.tolist() for v in t.predictions(2)] == [[1.0], [3.0]]
    rich.collection("inputs").include(r"_input_\d+$")
    assert [v.tolist() for v in t.inputs(4)] == [[0.0], [1.0]]
    assert [v.tolist() for v in t.inputs(1, mode=EVAL)] == [[0.0], [1.0]]
    assert "LocalTrial" in repr(t)


@pytest.mark.parametrize("step", [0, 3, 5])
def test_values_round_trip_every_dtype(rich, step):
    expected = rich_tensors(step)
    for name in ("Net_fc.weight", "Net_fc.bias", "i8", "u16", "flag", "big", "CrossEntropyLoss_output_0"):
        v = rich.tensor(name).value(step)
        assert v.dtype == expected[name].dtype and v.shape == expected[name].shape, name
        np.testing.assert_array_equal(v, expected[name])
        assert rich.tensor(name).dtype(step) == expected[name].dtype.name
    bf = rich.tensor("bf").value(step)
    assert bf.dtype == np.float32 and bf.tolist() == [1.5, -2.25]
    assert rich.tensor("bf").dtype(step) == "bfloat16"


def test_tensor_api(rich):
    w: Tensor = rich.tensor("Net_fc.weight")
    assert w.steps() == list(range(9)) and w.steps(TRAIN) == list(range(6))
    assert w.steps(EVAL) == [0, 1, 2] and w.steps(EVAL, show_incomplete_steps=True) == [0, 1, 2]
    np.testing.assert_array_equal(w.value(1, mode=EVAL), W + 7)
    vals = w.values()
    assert list(vals) == list(range(9)) and all((vals[s] == W + s).all() for s in vals)
    assert list(w.values(EVAL)) == [0, 1, 2]
    np.testing.assert_array_equal(w.values(EVAL)[2], W + 8)
    assert w.shape(4) == (4, 3) and w.shapes() == {s: (4, 3) for s in range(9)}
    assert w.workers(3) == ["worker_0"]
    assert w.prev_steps(5) == [0, 1, 2, 3, 4, 5] and w.prev_steps(5, 2) == [4, 5]
    assert w.prev_steps(1, 5, mode=EVAL) == [0, 1]
    g = rich.tensor("gradient/Net_fc.weight")
    assert g.steps() == list(range(6)) and g.steps(EVAL) == []
    with pytest.raises(ex.TensorUnavailableForStep):
        g.value(7)  # step 7 exists (EVAL) but gradients are not saved in EVAL
    with pytest.raises(ex.SMDebugNotImplementedError):
        w.step(0)
    with pytest.raises(ex.InvalidWorker):
        w.value(0, worker="worker_9")
    shape_only = rich.tensor("shape_only")
    assert shape_only.shape(3) == (3, 2) and shape_only.shapes(TRAIN) == {s: (s, 2) for s in range(6)}
    with pytest.raises(ex.TensorUnavailableForStep) as e:
        shape_only.value(3)
    assert not e.value.has_reductions
    with pytest.raises(ex.ShapeUnavailableForStep):
        rich.tensor("reduced_only").shape(2)


def test_reductions(rich):
    w = rich.tensor("Net_fc.weight")
    saved = w.reduction_values(2)
    assert set(saved) == {("mean", False), ("l2", True)}
    assert float(saved[("mean", False)]) == pytest.approx(float((W + 2).mean()))
    # A saved reduction is returned as saved; an unsaved one is computed like the hook does.
    assert float(w.reduction_value(2, "mean")) == float(saved[("mean", False)])
    assert float(w.reduction_value(2, "l2", abs=True)) == float(saved[("l2", True)])
    v = (W + 2).astype(np.float64)
    assert float(w.reduction_value(2, "variance")) == pytest.approx(v.var(ddof=1), rel=1e-5)
    assert float(w.reduction_value(2, "std")) == pytest.approx(v.std(ddof=1), rel=1e-5)
    assert float(w.reduction_value(2, "l1")) == pytest.approx(np.abs(v).sum(), rel=1e-5)
    assert float(w.reduction_value(2, "min", abs=True)) == pytest.approx(np.abs(v).min())
    assert w.reduction_value(2, "l2").shape == () and w.reduction_value(2, "l2").dtype == np.float32
    big = rich.tensor("big")
    assert int(big.reduction_value(3, "sum")) == int(np.arange(24).sum() * 3)  # 3-D works
    assert float(big.reduction_value(3, "l2")) == pytest.approx(np.linalg.norm(np.arange(24) * 3))
    with pytest.raises(ex.SMDebugValueError):
        w.reduction_value(2, "median")
    red_only = rich.tensor("reduced_only")
    assert float(red_only.reduction_value(4, "max")) == 4.0
    with pytest.raises(ex.TensorUnavailableForStep) as e:
        red_only.value(4)
    assert e.value.has_reductions and "reduced_only" in str(e.value)
    with pytest.raises(ex.TensorUnavailableForStep) as e:
        red_only.reduction_value(4, "min")
    assert e.value.tname == "reduced_only"  # smdebug reported the reduction name here
    with pytest.raises(ex.TensorUnavailableForStep):
        red_only.values()
    assert rich.tensor("Net_fc.bias").reduction_values(1) == {}


def test_missing_step_vs_future_step(tmp_path):
    out = str(tmp_path / "run")
    w = open_writer(out)
    write_steps(w, [0, 2, 4], simple_tensors)
    t = create_trial(out)
    assert not t.loaded_all_steps and t.steps() == [0, 2, 4]
    loss = t.tensor("loss")
    with pytest.raises(ex.StepUnavailable):  # skipped: a later step is complete
        loss.value(1)
    with pytest.raises(ex.StepNotYetAvailable):  # beyond what was written, job still running
        loss.value(6)
    assert t.has_passed_step(1) is StepState.UNAVAILABLE
    assert t.has_passed_step(4) is StepState.AVAILABLE
    assert t.has_passed_step(6) is StepState.NOT_YET_AVAILABLE
    with pytest.raises(ex.TensorUnavailable):
        t.tensor("never_saved")
    started = time.monotonic()
    with pytest.raises(ex.TrialDataTimeout):
        t.wait_for_steps([6], timeout=0.3)
    assert time.monotonic() - started < 60  # (not the trial's 600 s; a loaded machine is slow)
    write_steps(w, [6], lambda s: {**simple_tensors(s), "late": np.ones(2)})
    assert float(loss.value(6)) == pytest.approx(1 / 7)  # a miss refreshes
    assert t.tensor("late").steps() == [6]
    with pytest.raises(ex.TensorUnavailableForStep):
        t.tensor("late").value(4)  # step 4 complete, tensor not saved there
    t.wait_for_steps([0, 2, 6])
    w.close()
    with pytest.raises(ex.StepUnavailable):
        loss.value(8)
    assert t.loaded_all_steps and t.last_complete_step == 6
    with pytest.raises(ex.NoMoreData) as e:
        t.wait_for_steps([8])
    assert e.value.last_step == 6
    with pytest.raises(ex.StepUnavailable):
        t.wait_for_steps([3])
    assert t.has_passed_step(8) is StepState.UNAVAILABLE


def test_two_workers_one_lagging(tmp_path):
    out = str(tmp_path / "dist")
    fast = open_writer(out, "worker_1", num_workers=2)
    slow = open_writer(out, "worker_0", num_workers=2)

    def tensors(worker):
        return lambda s: {"w": np.full(2, 10 * s + worker, dtype=np.float32)}

    write_steps(fast, range(6), tensors(1), TRAIN)
    write_steps(slow, range(3), tensors(0), TRAIN)
    t = create_trial(out)
    assert t.num_workers == 2 and t.workers() == ["worker_0", "worker_1"]
    assert t.steps() == [0, 1, 2] and t.steps(show_incomplete_steps=True) == list(range(6))
    assert t.last_complete_step == 2
    w = t.tensor("w")
    assert w.steps() == [0, 1, 2] and w.steps(TRAIN) == [0, 1, 2]
    assert w.steps(TRAIN, show_incomplete_steps=True) == list(range(6))
    assert t.has_passed_step(4) is StepState.NOT_YET_AVAILABLE
    assert w.workers(1) == ["worker_0", "worker_1"] and w.workers(4) == ["worker_1"]
    assert w.value(1).tolist() == [10.0, 10.0]  # default: lexically first worker
    assert w.value(1, worker="worker_1").tolist() == [11.0, 11.0]
    assert w.value(4, worker="worker_1").tolist() == [41.0, 41.0]
    with pytest.raises(ex.StepNotYetAvailable):
        w.value(4)  # worker_0 has not written it: the default answer could still change
    with pytest.raises(ex.StepNotYetAvailable):
        w.value(4, worker="worker_0")
    with pytest.raises(ex.InvalidWorker):
        w.value(4, worker="worker_7")
    assert list(w.values(worker="worker_1")) == [0, 1, 2]
    write_steps(slow, range(3, 6), tensors(0), TRAIN)
    assert w.value(4).tolist() == [40.0, 40.0]
    assert t.steps() == list(range(6)) and t.last_complete_step == 5
    fast.close()
    slow.close()
    assert {s: v.tolist() for s, v in w.values(worker="worker_1").items()} == {
        s: [10.0 * s + 1] * 2 for s in range(6)}


def test_incomplete_step_window(tmp_path, monkeypatch):
    monkeypatch.setenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "4")
    out = str(tmp_path / "win")
    a = open_writer(out, "worker_0", num_workers=2)
    open_writer(out, "worker_1", num_workers=2).flush()
    write_steps(a, range(10), simple_tensors)
    t = create_trial(out)
    # 10 steps were written by one of two workers only; more than the window (4) are pending,
    # so the oldest half-window of them is declared complete.
    assert t.last_complete_step >= 1
    assert t.steps() == list(range(t.last_complete_step + 1))
    assert t.last_index_token.startswith(os.path.join(t.trial_dir, "index/000000000/"))


def test_range_steps(tmp_path):
    out = str(tmp_path / "rng")
    write_job(out, range(10))
    assert create_trial(out, range_steps=(3, 7)).steps() == [3, 4, 5, 6]
    assert create_trial(out, range_steps=(None, 3)).steps() == [0, 1, 2]
    t = create_trial(out, range_steps=(5, None))
    assert t.steps() == [5, 6, 7, 8, 9]
    with pytest.raises(ex.StepUnavailable):
        t.tensor("w").value(2)
    assert create_trial(out, range_steps=[2, 4]).steps() == [2, 3]
    for bad in [(5, 5), (7, 3), (-1, 3), ("a", 3), (1, 2, 3), 5, (True, 4)]:
        with pytest.raises(ex.SMDebugValueError):
            create_trial(out, range_steps=bad)


def test_bad_input(tmp_path, monkeypatch):
    out = str(tmp_path / "ok")
    write_job(out, range(2))
    t = create_trial(out)
    with pytest.raises(ex.SMDebugTypeError):
        create_trial(123)  # type: ignore[arg-type]
    with pytest.raises(ex.SMDebugValueError):
        create_trial("   ")
    with pytest.raises(TypeError):
        create_trial(out, bogus=1)
    with pytest.raises(ex.SMDebugValueError):
        create_trial(out, timeout=-1)
    with pytest.raises(ex.SMDebugNotImplementedError):
        create_trial(out, profiler=True)
    assert create_trial(out, parallel=False, check=True, cache=True).steps() == [0, 1]
    with pytest.raises(ex.SMDebugValueError):
        t.steps(mode="BOGUS")
    with pytest.raises(ValueError):
        t.tensor_names(regex="w", collection="weights")
    with pytest.raises(ex.SMDebugValueError):
        t.tensor_names(regex="[unclosed")
    with pytest.raises(ex.SMDebugTypeError):
        t.tensor_names(collection=5)
    with pytest.raises(ex.SMDebugValueError):
        t.tensor("w").value(0, mode=17)
    # No data at the path: a bounded wait, then a clear error naming the path.
    started = time.monotonic()
    with pytest.raises(ex.TrialDataTimeout) as e:
        create_trial(str(tmp_path / "nothing_here"), timeout=0.6)
    assert time.monotonic() - started < 60 and "nothing_here" in str(e.value)  # (not 600 s)
    monkeypatch.setenv("SMDEBUG_TRIAL_TIMEOUT", "0.3")
    with pytest.raises(ex.TrialDataTimeout):
        create_trial(str(tmp_path / "nothing_either"))
    monkeypatch.setenv("SMDEBUG_TRIAL_TIMEOUT", "soon")
    with pytest.raises(ex.SMDebugValueError):
        create_trial(out)
    monkeypatch.delenv("SMDEBUG_TRIAL_TIMEOUT")
    # Training ended without any collections file: smdebug's MissingCollectionFiles.
    ended = tmp_path / "ended"
    ended.mkdir()
    (ended / END_OF_JOB_FILE).write_bytes(b"")
    with pytest.raises(ex.MissingCollectionFiles):
        create_trial(str(ended))


def test_default_name_and_path_forms(tmp_path):
    out = tmp_path / "named_run"
    write_job(str(out), range(1))
    assert create_trial(f"  {out}/ ").name == "named_run"
    assert create_trial(str(out), name="custom").name == "custom"


def test_refresh_context_managers_restore_previous_value(tmp_path):
    out = str(tmp_path / "live")
    w = open_writer(out)
    write_steps(w, [0], simple_tensors)
    t1, t2 = create_trial(out), create_trial(out)
    with no_refresh([t1, t2]):
        write_steps(w, [1], simple_tensors)
        assert t1.steps() == [0] and t2.steps() == [0]
        with pytest.raises(ex.StepNotYetAvailable):
            t1.tensor("w").value(1)  # no refresh at all inside the block, not even on a miss
        with refresh(t1):
            assert t1.steps() == [0, 1]
        assert t1.dynamic_refresh is False  # restored to the enclosing block's value
        with no_refresh(t1):
            pass
        assert t1.dynamic_refresh is False
    assert t1.dynamic_refresh is True and t2.dynamic_refresh is True
    assert t2.steps() == [0, 1]
    t1.dynamic_refresh = False
    with refresh(t1):
        assert t1.dynamic_refresh
    assert t1.dynamic_refresh is False  # smdebug would have left it True... and vice versa
    w.close()


def test_parse_bool():
    assert parse_bool(None, True) is True and parse_bool("TRUE", False) is True
    assert parse_bool("false", True) is False and parse_bool(False, True) is False
    with pytest.raises(ValueError):
        parse_bool("maybe", True)


def test_shape_and_value_saved_together(tmp_path):
    """smdebug lost the raw value when a shape entry for the same tensor was in the index."""
    out = str(tmp_path / "both")
    write_job(out, range(2))
    index = tmp_path / "both" / "index" / "000000000" / "000000000001_worker_0.json"
    doc = json.loads(index.read_text())
    doc["shape_payload"] = [{"tensorname": "w", "originalname": "w_orig", "shape": [4, 3]}]
    index.write_text(json.dumps(doc))
    t = create_trial(out)
    w = t.tensor("w")
    assert w.shape(1) == (4, 3) and w.value(1).shape == (4, 3) and w.original_name == "w_orig"


def test_double_underscore_in_path_keeps_worker_names(tmp_path):
    out = str(tmp_path / "my__run")
    write_job(out, range(2))
    t = create_trial(out)
    assert t.workers() == ["worker_0"] and t.tensor("w").workers(1) == ["worker_0"]


def test_missing_event_file_is_reported_without_waiting(tmp_path):
    out = str(tmp_path / "gone")
    write_job(out, range(3))
    os.unlink(tmp_path / "gone" / "events" / "000000000001" / "000000000001_worker_0.tfevents")
    t = create_trial(out)
    started = time.monotonic()
    with pytest.raises(ex.EventFileMissing):  # not "not saved": the index says it was
        t.tensor("w").value(1)
    assert time.monotonic() - started < 20  # (its retries would take 50 s)
    assert float(t.tensor("loss").value(2)) == pytest.approx(1 / 3)


def test_unreadable_index_file_is_skipped(tmp_path):
    out = str(tmp_path / "badindex")
    write_job(out, range(4), lambda s: {**simple_tensors(s),
                                        "smdebug/reductions/mean": np.ones(1)})
    index = tmp_path / "badindex" / "index" / "000000000"
    (index / "000000000001_worker_0.json").write_text("{")
    (index / "000000000002_worker_0.json").write_text('{"meta": {"mode": "SOMETIMES"}}')
    t = create_trial(out)
    assert t.steps() == [0, 3]
    assert sorted(k[-26:-14] for k in t._index.bad_files) == ["000000000001", "000000000002"]
    # A name under the reduction prefix that is not a well-formed reduction stays a tensor.
    assert "smdebug/reductions/mean" in t.tensor_names()
    assert t.tensor("smdebug/reductions/mean").value(3).tolist() == [1.0]


def test_end_marker_with_a_worker_still_behind(tmp_path, monkeypatch):
    """Each worker writes training_job_end.ts when it finishes; the trial waits (bounded) for
    the other workers' steps instead of declaring everything loaded at once."""
    monkeypatch.setenv("SMDEBUG_TRIAL_END_GRACE", "0.5")
    out = str(tmp_path / "straggler")
    done = open_writer(out, "worker_0", num_workers=2)
    behind = open_writer(out, "worker_1", num_workers=2)
    write_steps(done, range(4), simple_tensors)
    write_steps(behind, range(2), simple_tensors)
    done.close()  # writes the end marker
    t = create_trial(out)
    assert not t.loaded_all_steps and t.steps() == [0, 1]
    write_steps(behind, [2], simple_tensors)
    assert t.tensor("w").value(2).shape == (4, 3) and t.steps() == [0, 1, 2]
    time.sleep(0.6)  # worker_1 never writes step 3: after the grace it counts as ended
    assert t.steps() == [0, 1, 2, 3] and t.loaded_all_steps
    assert t.tensor("w").workers(3) == ["worker_0"]


def test_small_cache_evicts_and_stays_correct(tmp_path, monkeypatch):
    monkeypatch.setenv("SMDEBUG_READER_CACHE_MB", "0.004")  # about 4 KB: a file or two
    out = str(tmp_path / "evict")
    write_job(out, range(30))
    t = create_trial(out)
    for _ in range(2):
        for name in ("w", "b", "loss"):
            vals = t.tensor(name).values()
            assert list(vals) == list(range(30))
            for s, v in vals.items():
                np.testing.assert_array_equal(v, simple_tensors(s)[name])
        for s in (3, 17, 29):
            assert t.tensor("b").value(s).tolist() == [float(s)] * 3
    reader = t._values
    assert reader.cached_bytes <= 4200 + 2000 and len(reader._cache) < 30
    cached = {(n, st) for (n, _), col in reader._columns.items() for st in col}
    held = {rec for entry in reader._cache.values() for rec in entry.held()}
    assert cached == held  # evicted files left no arrays behind


def test_bulk_reads_keep_array_identity_and_read_each_file_whole_at_most_once(tmp_path, monkeypatch):
    """values() reads one record per file; a second tensor of those files reads them whole,
    once; arrays already returned stay the same objects throughout."""
    import smdebug_lite.storage.local_reads as local_reads

    monkeypatch.setattr(local_reads, "PARALLEL_MIN", 4)  # the threaded path, on a small job
    out = str(tmp_path / "bulk")
    write_job(out, range(12))
    t = create_trial(out)
    reader = t._values
    w = t.tensor("w").values()
    assert reader.range_reads == 12 and reader.file_reads == 0
    for s, v in w.items():
        np.testing.assert_array_equal(v, simple_tensors(s)["w"])
        assert t.tensor("w").value(s) is v  # from the bulk read, no file touched
    assert reader.range_reads == 12 and reader.file_reads == 0
    b = t.tensor("b").values()  # the second record of each file: read whole
    assert reader.file_reads == 12 and reader.range_reads == 12
    assert list(b) == list(range(12)) and b[5].tolist() == [5.0] * 3
    assert all(t.tensor("w").value(s) is v for s, v in w.items())
    assert t.tensor("loss").values()[3] == pytest.approx(simple_tensors(3)["loss"])
    assert reader.file_reads == 12  # nothing read again
    assert t.tensor("w").values() == w and all(t.tensor("w").values()[s] is w[s] for s in w)
