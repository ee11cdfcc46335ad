"""On-the-fly reductions follow the PyTorch hook's definitions, and reduction tensor names."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.reductions import (
    ALL_REDUCTIONS,
    compute_reduction,
    is_reduction_tensor_name,
    parse_reduction_tensor_name,
    reduction_tensor_name,
)

RNG = np.random.default_rng(3)


def torch_reference(x: np.ndarray, name: str, is_abs: bool) -> float:
    """How smdebug's PyTorch hook computes a saved reduction (pytorch/utils.py semantics)."""
    t = torch.from_numpy(np.array(x))
    if is_abs:
        t = t.abs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in ("l1", "l2"):
            return float(torch.norm(t.flatten().to(torch.float64), p=int(name[1])))
        op = {"variance": "var"}.get(name, name)
        if op in ("min", "max"):
            return float(getattr(t, op)())
        return float(getattr(t.to(torch.float64), op)())


@pytest.mark.parametrize("shape", [(), (1,), (7,), (4, 5), (2, 3, 4), (2, 2, 2, 3)])
@pytest.mark.parametrize("name", ALL_REDUCTIONS)
@pytest.mark.parametrize("is_abs", [False, True])
def test_matches_torch(shape, name, is_abs):
    x = (RNG.standard_normal(shape) * 0.9).astype(np.float32)
    got = compute_reduction(name, x, is_abs)
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(float(got), torch_reference(x, name, is_abs), rtol=2e-5,
                               atol=1e-30, equal_nan=True)


def test_matrix_example_against_smdebug_answers():
    """On [[1,-2],[3,4]] smdebug's reader said var 5.25 and l1 6 (matrix norm);
    the hook saved var 7.0 and l1 10."""
    x = np.array([[1, -2], [3, 4]], dtype=np.float32)
    assert float(compute_reduction("variance", x)) == pytest.approx(7.0)
    assert float(compute_reduction("l1", x)) == pytest.approx(10.0)
    assert float(compute_reduction("l2", x)) == pytest.approx(np.sqrt(30.0))
    assert float(compute_reduction("std", x, abs=True)) == pytest.approx(np.std([1, 2, 3, 4], ddof=1))


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint8])
def test_other_dtypes(dtype):
    x = (np.arange(12).reshape(3, 4) - 5).astype(dtype)
    for name in ALL_REDUCTIONS:
        v = compute_reduction(name, x)
        ref = torch_reference(x.astype(np.float64), name, False)
        if name == "prod":
            continue  # integer overflow / wrap-around is dtype specific
        assert float(v) == pytest.approx(ref, rel=2e-3), (dtype, name)
    assert compute_reduction("mean", x.astype(np.float16)).dtype == np.float16


def test_single_element_variance_is_nan_like_torch():
    assert np.isnan(compute_reduction("variance", np.array(3.0, dtype=np.float32)))
    assert np.isnan(compute_reduction("std", np.array([3.0], dtype=np.float32)))


def test_rejected_names_and_values():
    with pytest.raises(SMDebugValueError):
        compute_reduction("median", np.ones(3))
    with pytest.raises(SMDebugValueError):
        compute_reduction("l1_norm", np.ones(3))
    with pytest.raises(SMDebugValueError):
        compute_reduction("min", np.ones(0))
    with pytest.raises(SMDebugValueError):
        compute_reduction("max", np.array(["a", "b"]))


def test_names_round_trip():
    for tname in ("Net_fc1.weight", "gradient/Net_fc1.bias", "a/b/c"):
        for red in ALL_REDUCTIONS:
            for is_abs in (False, True):
                full = reduction_tensor_name(tname, red, is_abs)
                assert is_reduction_tensor_name(full)
                assert parse_reduction_tensor_name(full) == (tname, red, is_abs)
    assert reduction_tensor_name("x", "l2", True) == "smdebug/reductions/abs_l2/x"
    assert not is_reduction_tensor_name("x")
    for bad in ("x", "smdebug/reductions/mean", "smdebug/reductions//x"):
        with pytest.raises(SMDebugValueError):
            parse_reduction_tensor_name(bad)
