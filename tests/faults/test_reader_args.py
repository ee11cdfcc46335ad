"""Wrong arguments to the reader fail at once with SMDebugTypeError / SMDebugValueError naming the
argument, the value and what was expected; smdebug's accepted forms (numpy integer steps,
mode names and values, mode=None) keep working."""

from __future__ import annotations

import numpy as np
import pytest
from trial_builders import simple_tensors, write_job

from smdebug_lite.exceptions import (
    SMDebugError,
    SMDebugTypeError,
    SMDebugValueError,
    StepUnavailable,
    TrialDataTimeout,
)
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial
from smdebug_lite.trials.tensor import StepState


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    out = tmp_path_factory.mktemp("args") / "job"
    write_job(str(out), range(5))
    return create_trial(str(out))


def test_create_trial_on_a_file_fails_at_once(tmp_path):
    f = tmp_path / "not_a_trial.json"
    f.write_text("{}")
    with pytest.raises(SMDebugValueError) as e:
        create_trial(str(f), timeout=60)
    assert not isinstance(e.value, TrialDataTimeout)
    assert f"{f} is a file, not a trial directory" in str(e.value)


BAD_STEPS = ["3", None, 3.0, True, [3], b"3"]


@pytest.mark.parametrize("bad", BAD_STEPS, ids=repr)
def test_bad_step_numbers(trial, bad):
    t = trial.tensor("w")
    calls = {
        "step_num": [lambda: t.value(bad), lambda: t.shape(bad), lambda: t.dtype(bad),
                     lambda: t.reduction_value(bad, "mean"), lambda: t.reduction_values(bad),
                     lambda: t.workers(bad)],
        "step": [lambda: trial.has_passed_step(bad), lambda: t.prev_steps(bad),
                 lambda: trial.inputs(bad), lambda: trial.labels(bad),
                 lambda: trial.predictions(bad)],
        "mode_step": [lambda: trial.global_step(ModeKeys.TRAIN, bad)],
        "global_step": [lambda: trial.mode_modestep(bad), lambda: trial.mode(bad),
                        lambda: trial.mode_step(bad)],
        "required_steps item": [lambda: trial.wait_for_steps([0, bad], timeout=1)],
    }
    if bad is not None:  # step=None means "any step" for tensor_names
        calls["step"].append(lambda: trial.tensor_names(step=bad))
    for argument, fns in calls.items():
        for fn in fns:
            with pytest.raises(SMDebugTypeError) as e:
                fn()
            msg = str(e.value)
            assert f"{argument}={bad!r}" in msg and "expected an int" in msg, msg
            assert isinstance(e.value, TypeError)  # what plain Python code catches


def test_numpy_integer_steps_are_steps(trial):
    t = trial.tensor("w")
    for step in (np.int64(3), np.int32(3), np.uint8(3)):
        np.testing.assert_array_equal(t.value(step), simple_tensors(3)["w"])
        assert t.reduction_value(step, "max") == 14.0
        assert trial.has_passed_step(step) is StepState.AVAILABLE
        assert t.prev_steps(step, n=np.int64(2)) == [2, 3]
        assert trial.mode_modestep(step) == (ModeKeys.TRAIN, 3)
    trial.wait_for_steps(np.arange(3))


@pytest.mark.parametrize("bad", [0, ["worker_0"], b"worker_0"], ids=repr)
def test_bad_worker(trial, bad):
    t = trial.tensor("w")
    for fn in (lambda: t.value(1, worker=bad), lambda: t.values(worker=bad),
               lambda: t.shape(1, worker=bad), lambda: t.shapes(worker=bad),
               lambda: t.dtype(1, worker=bad), lambda: t.reduction_value(1, "mean", worker=bad),
               lambda: t.reduction_values(1, worker=bad)):
        with pytest.raises(SMDebugTypeError) as e:
            fn()
        assert f"worker={bad!r}" in str(e.value) and "worker_0" in str(e.value)


def test_bad_names(trial):
    t = trial.tensor("w")
    with pytest.raises(SMDebugTypeError, match=r"reduction_name=5 .*'mean'"):
        t.reduction_value(1, 5)
    with pytest.raises(SMDebugValueError, match="Invalid reduction type 'median5'"):
        t.reduction_value(1, "median5")
    for fn in (lambda: trial.tensor(5), lambda: trial.has_tensor(None),
               lambda: trial.tensor(["w"])):
        with pytest.raises(SMDebugTypeError, match="tname="):
            fn()


@pytest.mark.parametrize("bad", ["TRAINING", 7, 1.0, ["TRAIN"]], ids=repr)
def test_bad_modes(trial, bad):
    t = trial.tensor("w")
    for fn in (lambda: t.value(1, mode=bad), lambda: t.steps(mode=bad),
               lambda: trial.steps(mode=bad), lambda: trial.has_passed_step(1, mode=bad),
               lambda: trial.tensor_names(mode=bad), lambda: trial.global_step(bad, 1),
               lambda: trial.wait_for_steps([1], mode=bad, timeout=1)):
        with pytest.raises(SMDebugValueError) as e:
            fn()
        assert f"mode={bad!r}" in str(e.value) and "TRAIN" in str(e.value)


def test_accepted_mode_forms_and_mode_none(trial):
    t = trial.tensor("w")
    for mode in (ModeKeys.TRAIN, "train", "TRAIN", 1):
        np.testing.assert_array_equal(t.value(2, mode=mode), simple_tensors(2)["w"])
    assert trial.steps(mode=None) == [] and t.steps(mode=None) == []
    assert t.values(mode=None) == {}
    with pytest.raises(StepUnavailable):
        t.value(2, mode=None)


def test_wait_for_steps_arguments(trial):
    for bad in (5, "12", None):
        with pytest.raises(SMDebugTypeError, match="required_steps="):
            trial.wait_for_steps(bad)
    for bad in ("1", -1, True):
        with pytest.raises(SMDebugValueError, match="timeout="):
            trial.wait_for_steps([1], timeout=bad)
    trial.wait_for_steps([0, 1], timeout=0)  # available steps need no waiting


def test_every_argument_error_is_an_smdebug_error(trial):
    with pytest.raises(SMDebugError):
        trial.has_passed_step("x")
    with pytest.raises(SMDebugError):
        trial.tensor("w").prev_steps(3, n="2")
