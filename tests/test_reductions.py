"""One home for reductions: on-the-fly values follow the PyTorch hook's definitions, the hooks'
numpy path is the same function, reduction tensor names, and the counts (num_nan, num_inf,
num_zero) computed alike by numpy, torch and TF."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from smdebug_lite.config.reductions import (
    ALL_REDUCTIONS,
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    COUNT_REDUCTIONS,
    compute_reduction,
    is_reduction_tensor_name,
    parse_reduction_tensor_name,
    reduce_array,
    reduction_tensor_name,
)
from smdebug_lite.exceptions import SMDebugValueError

VALUE_REDUCTIONS = ALLOWED_REDUCTIONS + ALLOWED_NORMS

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
@pytest.mark.parametrize("name", VALUE_REDUCTIONS)
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
    for name in VALUE_REDUCTIONS:
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


def test_tf_output_index_dropped_unless_kept():
    assert reduction_tensor_name("dense/kernel:0", "mean", True) \
        == "smdebug/reductions/abs_mean/dense/kernel"
    assert reduction_tensor_name("dense/kernel:0", "mean", False, keep_tf_suffix=True) \
        == "smdebug/reductions/mean/dense/kernel:0"


def test_one_vocabulary_everywhere():
    """The config and the smdebug.core path re-export the module's objects, not copies."""
    from smdebug_lite.compat.core import reduction_config as compat_rc
    from smdebug_lite.config import reduction_config as rc
    from smdebug_lite.hooks import reduction_tensor_name as hooks_name

    assert rc.ALLOWED_REDUCTIONS is ALLOWED_REDUCTIONS and rc.ALLOWED_NORMS is ALLOWED_NORMS
    assert compat_rc.ALLOWED_REDUCTIONS is ALLOWED_REDUCTIONS
    assert hooks_name is reduction_tensor_name
    assert ALL_REDUCTIONS == tuple(VALUE_REDUCTIONS + COUNT_REDUCTIONS)
    assert COUNT_REDUCTIONS == ["num_nan", "num_inf", "num_zero"]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64, np.int32,
                                   np.uint8, np.bool_])
def test_hook_numpy_path_is_the_reader_definition(dtype):
    x = (np.arange(-5, 7).reshape(3, 4) * 0.75).astype(dtype)
    for name in ALL_REDUCTIONS:
        for is_abs in (False, True):
            saved = reduce_array(x, name, is_abs)
            assert saved.shape == () and type(saved) is np.ndarray
            computed = compute_reduction(name, x, is_abs)
            assert saved.dtype == computed.dtype
            np.testing.assert_array_equal(saved, computed)


def _special() -> np.ndarray:
    x = np.array([[0.0, 1.5, np.nan], [np.inf, -np.inf, 0.0], [-0.0, np.nan, 2.0]], np.float32)
    return x


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_counts_numpy(dtype):
    x = _special().astype(dtype)
    for is_abs in (False, True):
        got = {n: compute_reduction(n, x, is_abs) for n in COUNT_REDUCTIONS}
        assert all(v.dtype == np.int64 and v.shape == () for v in got.values())
        assert {n: int(v) for n, v in got.items()} == {"num_nan": 2, "num_inf": 2, "num_zero": 3}
    c = np.array([1 + 1j, complex(np.nan, 0), complex(0, np.inf), 0j], np.complex64)
    assert [int(compute_reduction(n, c)) for n in COUNT_REDUCTIONS] == [1, 1, 1]
    ints = np.array([0, 3, 0, -1], np.int32)
    assert [int(compute_reduction(n, ints)) for n in COUNT_REDUCTIONS] == [0, 0, 2]
    assert [int(compute_reduction(n, np.zeros(0))) for n in COUNT_REDUCTIONS] == [0, 0, 0]
    with pytest.raises(TypeError):
        compute_reduction("num_nan", np.array(["a"]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_counts_torch_on_device_match_numpy(dtype):
    from smdebug_lite.pytorch.reductions import reduce_tensor

    t = torch.from_numpy(_special()).to(dtype)
    for name in COUNT_REDUCTIONS:
        got = reduce_tensor(t, name, False)
        assert got.dtype == torch.int64 and got.shape == () and got.device == t.device
        assert int(got) == int(compute_reduction(name, _special()))
        assert int(reduce_tensor(t, name, True)) == int(got)
    ints = torch.tensor([0, 5, 0], dtype=torch.int16)
    assert [int(reduce_tensor(ints, n, False)) for n in COUNT_REDUCTIONS] == [0, 0, 2]
    flags = torch.tensor([True, False, False])
    assert [int(reduce_tensor(flags, n, False)) for n in COUNT_REDUCTIONS] == [0, 0, 2]


def test_counts_tf_match_numpy():
    tf = pytest.importorskip("tensorflow")
    from smdebug_lite.tensorflow.reductions import tf_reductions

    x = _special()
    pairs = [("mean", True), ("num_nan", False), ("max", False), ("num_inf", False),
             ("num_zero", False)]
    for dtype in (tf.float16, tf.float32, tf.float64):
        got = tf_reductions(tf.constant(x.astype(dtype.as_numpy_dtype)), pairs)
        assert list(got) == pairs
        for name in COUNT_REDUCTIONS:
            assert got[(name, False)].dtype == np.int64
            assert int(got[(name, False)]) == int(compute_reduction(name, x))
        assert got[("max", False)].dtype == dtype.as_numpy_dtype
    only_counts = tf_reductions(tf.constant(x), [("num_nan", False)])
    assert int(only_counts[("num_nan", False)]) == 2
    ints = tf_reductions(tf.constant([0, 1, 0]), [("num_zero", False), ("num_nan", False)])
    assert {k: int(v) for k, v in ints.items()} == {("num_zero", False): 2, ("num_nan", False): 0}
