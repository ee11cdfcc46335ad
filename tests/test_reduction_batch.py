"""Reductions batched over a tensor's steps equal the ones computed one by one, bit for bit,
and a sweep of reduction_value over a trial gives what compute_reduction gives on each value."""

from __future__ import annotations

import numpy as np
import pytest
from trial_builders import write_job

from smdebug_lite.config.reductions import ALL_REDUCTIONS, compute_reduction
from smdebug_lite.trials import create_trial
from smdebug_lite.trials.reduction_batch import MIN_ROWS, batchable, reduce_rows


def _same(a: np.generic, b: np.generic) -> bool:
    return type(a) is type(b) and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (8, 16), (129,), (3, 5, 67), (4096,)])
@pytest.mark.parametrize("reduction", ["min", "max", "sum", "mean"])
@pytest.mark.parametrize("is_abs", [False, True])
def test_rows_equal_one_by_one(dtype, shape, reduction, is_abs):
    rng = np.random.default_rng(len(shape) * 7 + hash(reduction) % 97)
    arrays = [(rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(dtype)
              for _ in range(40)]
    arrays[3] = np.full(shape, np.nan, dtype=dtype)
    assert all(batchable(reduction, a) for a in arrays)
    found = reduce_rows(reduction, is_abs, arrays)
    assert found is not None
    for a, v in zip(arrays, found, strict=True):
        expected = compute_reduction(reduction, a, is_abs)
        assert _same(v, expected) or (np.isnan(v) and np.isnan(expected)
                                      and type(v) is type(expected))


@pytest.mark.parametrize("arr, reduction", [
    (np.zeros(3, np.float16), "mean"),  # computed in float32, cast back
    (np.zeros(3, np.int32), "mean"),
    (np.zeros(3, np.float32), "l2"),
    (np.zeros(3, np.float32), "variance"),
    (np.zeros(0, np.float32), "max"),  # an error, raised one by one
    (np.zeros(5000, np.float32), "mean"),  # too large to copy
    (np.zeros((4, 4), np.float32).T, "mean"),  # not C-contiguous
    (np.zeros(3, ">f4" if np.little_endian else "<f4"), "mean"),  # not native
])
def test_not_batched(arr, reduction):
    assert not batchable(reduction, arr)


def _tensors(s: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(s)
    return {
        "w": rng.standard_normal((6, 5)).astype(np.float32),
        "b": rng.standard_normal(3),
        "loss": np.array(rng.standard_normal(), dtype=np.float32),
        "i": rng.integers(-9, 9, size=4).astype(np.int32),
        "h": rng.standard_normal(5).astype(np.float16),
        "grow": rng.standard_normal(1 + s % 3).astype(np.float32),  # shapes vary by step
    }


def test_sweep_equals_compute_reduction(tmp_path):
    steps = range(3 * MIN_ROWS)
    write_job(str(tmp_path), steps=steps, tensors_at=_tensors)
    tr = create_trial(str(tmp_path))
    names = tr.tensor_names()
    for name in names:  # the first tensor loads the files; the later ones are batched
        t = tr.tensor(name)
        for reduction in ALL_REDUCTIONS:
            for is_abs in (False, True):
                for s in t.steps():
                    got = t.reduction_value(s, reduction, abs=is_abs)
                    expected = compute_reduction(reduction, t.value(s), is_abs)
                    assert type(got) is type(expected), (name, reduction, s)
                    assert got.tobytes() == expected.tobytes() or (
                        np.isnan(got) and np.isnan(expected)), (name, reduction, s)
                    assert t.reduction_value(s, reduction, abs=is_abs) is got  # kept
