"""TensorFlow's quantized dtypes (qint8, quint8, qint16, quint16, qint32) are saved and read.

smdebug's Keras hook saved ``tensor.numpy()``, which for a quantized tensor is its plain
integers; numpy arrays of TensorFlow's one-field records (``tf.qint8.as_numpy_dtype``) went
through smdebug's proto dtype table. Here both are saved by a real KerasHook, read back with
``create_trial``, read by the real smdebug 1.0.34, and files smdebug wrote are read by ours.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from lazy_module import lazy, require_module
from refvenv import ref_python, run_ref

import _smdebug_lite_alias

_smdebug_lite_alias.install()

from smdebug.core.reader import FileReader  # noqa: E402
from smdebug.core.tfevent.util import _get_proto_dtype, make_tensor_proto  # noqa: E402

from smdebug_lite import modes  # noqa: E402

require_module("tensorflow")
tf = lazy("tensorflow")
smd = lazy("smdebug.tensorflow")
tf_reductions_module = lazy("smdebug_lite.tensorflow.reductions")

# TF dtype name -> the plain integer numpy dtype it stores (names, so that collecting does not
# import TensorFlow)
PLAIN = {
    "qint8": np.dtype(np.int8),
    "quint8": np.dtype(np.uint8),
    "qint16": np.dtype(np.int16),
    "quint16": np.dtype(np.uint16),
    "qint32": np.dtype(np.int32),
}


@functools.cache
def _quantized() -> dict:
    """TF dtype -> the plain integer numpy dtype it stores."""
    return {getattr(tf, name): plain for name, plain in PLAIN.items()}

VALUES = [[0, 1, 2], [3, 100, 120]]
NEGATIVE = [[-128, -1, 0], [1, 2, 127]]  # for the signed types


def _values(dt) -> list:
    return NEGATIVE if _quantized()[dt].kind == "i" else VALUES


def _record(dt) -> np.ndarray:
    """The numpy form TensorFlow gives a quantized dtype: a one-field record array."""
    return np.array(_values(dt), dtype=_quantized()[dt]).view(dt.as_numpy_dtype)


def _save_all_kinds(out_dir: str) -> None:
    hook = smd.KerasHook(out_dir, save_config=smd.SaveConfig(save_interval=1),
                     include_collections=["quantized"])
    hook.get_collection("quantized").include("^q")
    hook.get_collection("quantized").reduction_config = smd.ReductionConfig(
        reductions=["min", "max", "sum"], save_raw_tensor=True)
    hook.set_mode(modes.TRAIN)
    hook.start_step()
    for dt in _quantized():
        hook.save_tensor(f"q_tensor_{dt.name}", tf.constant(_values(dt), dtype=dt), "quantized")
        hook.save_tensor(f"q_record_{dt.name}", _record(dt), "quantized")
    hook.close()


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    out_dir = str(tmp_path_factory.mktemp("quantized") / "run")
    _save_all_kinds(out_dir)
    return out_dir


def test_tf_gives_plain_integers_for_quantized_tensors():
    for dt, plain in _quantized().items():
        assert tf.constant(_values(dt), dtype=dt).numpy().dtype == plain
        assert dt.as_numpy_dtype.names == (dt.name,)


@pytest.mark.parametrize("kind", ["tensor", "record"])
@pytest.mark.parametrize("dt", list(PLAIN))
def test_keras_hook_saves_and_reads_back(saved, kind, dt):
    dt = getattr(tf, dt)
    trial = smd.create_trial(saved)
    t = trial.tensor(f"q_{kind}_{dt.name}")
    value = t.value(0)
    assert value.dtype == _quantized()[dt]
    np.testing.assert_array_equal(value, np.array(_values(dt), dtype=_quantized()[dt]))
    assert t.dtype(0) == _quantized()[dt].name
    expected = np.array(_values(dt))
    assert t.reduction_value(0, "min") == expected.min()
    assert t.reduction_value(0, "max") == expected.max()
    assert t.reduction_value(0, "sum") == expected.sum()


def test_tf_reductions_of_a_quantized_tensor():
    t = tf.constant([[-5, -1, 3], [1, 2, 127]], dtype=tf.qint8)
    out = tf_reductions_module.tf_reductions(t, [("max", False), ("min", True), ("sum", False), ("num_zero", False)])
    assert out[("max", False)] == 127 and out[("min", True)] == 1
    assert out[("sum", False)] == 127 and out[("num_zero", False)] == 0


def test_smdebug_proto_dtype_table_has_the_quantized_records():
    # The codes smdebug 1.0.34 gave them (quint16 and qint32 as their plain types).
    assert [_get_proto_dtype(dt.as_numpy_dtype) for dt in _quantized()] == [
        (True, "DT_QINT8"), (True, "DT_QUINT8"), (True, "DT_QINT16"), (True, "DT_UINT16"),
        (True, "DT_INT32")]
    proto = make_tensor_proto(_record(tf.qint16), "q")
    assert proto.dtype == 15 and [d.size for d in proto.tensor_shape.dim] == [2, 3]
    assert proto.tensor_content == np.array(NEGATIVE, dtype="<i2").tobytes()


def test_bad_records_are_still_refused(tmp_path):
    from smdebug_lite.exceptions import SMDebugTypeError
    from smdebug_lite.format.tensor_codec import to_storable, unwrap_quantized

    two_fields = np.zeros(2, dtype=[("qint8", "i1"), ("x", "i1")])
    other_name = np.zeros(2, dtype=[("value", "i1")])
    wrong_width = np.zeros(2, dtype=[("qint8", "<i4")])
    for arr in (two_fields, other_name, wrong_width):
        assert unwrap_quantized(arr) is arr
        with pytest.raises(SMDebugTypeError, match="not supported"):
            to_storable(arr)


@pytest.mark.reference
def test_smdebug_reads_what_the_keras_hook_saved(saved):
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    code = (
        "import json, sys\n"
        "from smdebug.trials import create_trial\n"
        "t = create_trial(sys.argv[1])\n"
        "print(json.dumps({n: t.tensor(n).value(0).tolist() for n in t.tensor_names()}))\n"
    )
    proc = run_ref(code, saved)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    for dt in _quantized():
        for kind in ("tensor", "record"):
            assert values[f"q_{kind}_{dt.name}"] == _values(dt), (kind, dt.name)


@pytest.mark.reference
def test_we_read_quantized_records_smdebug_wrote(tmp_path):
    """smdebug's FileWriter wrote DT_QINT8/QUINT8/QINT16 (its own reader raised KeyError on
    them) and DT_UINT16/DT_INT32 for quint16/qint32; we read all five as plain integers."""
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    fields = {dt.name: _quantized()[dt].str for dt in _quantized()}
    code = (
        "import json, sys\n"
        "import numpy as np\n"
        "from smdebug.core.writer import FileWriter\n"
        "w = FileWriter(trial_dir=sys.argv[1], step=0, worker='worker_0')\n"
        "for name, base in json.loads(sys.argv[2]).items():\n"
        "    values = json.loads(sys.argv[3]) if base[1] == 'i' else json.loads(sys.argv[4])\n"
        "    w.write_tensor(tdata=np.array(values, dtype=base).view([(name, base)]),\n"
        "                   tname='q_' + name)\n"
        "print(w.name())\n"
        "w.close()\n"
    )
    proc = run_ref(code, str(tmp_path), json.dumps(fields), json.dumps(NEGATIVE),
                   json.dumps(VALUES))
    assert proc.returncode == 0, proc.stderr[-3000:]
    event_file = proc.stdout.strip().splitlines()[-1]
    with FileReader(event_file) as reader:
        read = {name: value for name, _step, value, _m, _ms in reader.read_tensors()}
    assert set(read) == {f"q_{dt.name}" for dt in _quantized()}
    for dt, plain in _quantized().items():
        assert read[f"q_{dt.name}"].dtype == plain
        np.testing.assert_array_equal(read[f"q_{dt.name}"], np.array(_values(dt), dtype=plain))


def test_every_numpy_type_tensorflow_knows_has_a_proto_dtype():
    """TensorFlow 2.21 maps float8/float4, int4/int2 and numpy's StringDType too (newer than
    smdebug): they get the proto dtype they are written as, and make_tensor_proto writes them
    in that dtype (float32, int32, strings)."""
    from tensorflow.python.framework.dtypes import _NP_TO_TF

    for np_type in _NP_TO_TF:
        _get_proto_dtype(np.dtype(np_type))
    import ml_dtypes

    proto = make_tensor_proto(np.array([1.5, -2.0], dtype=ml_dtypes.float8_e5m2), "f8")
    assert np.frombuffer(proto.tensor_content, "<f4").tolist() == [1.5, -2.0]
    proto = make_tensor_proto(np.array([-8, 7], dtype=ml_dtypes.int4), "i4")
    assert np.frombuffer(proto.tensor_content, "<i4").tolist() == [-8, 7]
