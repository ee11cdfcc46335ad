"""The offline stand-ins the upstream TF2 runs use (scripts/upstream_offline.py), checked with real
TensorFlow in both Keras flavours, and what scripts/upstream_tests.py leaves out of them."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


upstream_tests = _load_script("upstream_tests")

# Runs in a child process (the stand-ins and the socket guard are process-wide) and prints what
# it found as JSON.
PROBE = textwrap.dedent("""
    import json, socket, sys
    import upstream_offline as uo

    uo.install()
    import numpy as np
    import tensorflow as tf
    from tensorflow.keras.datasets import cifar10, mnist

    out = {"keras_loaded": "keras" in sys.modules, "tf_keras_loaded": "tf_keras" in sys.modules}
    out["tf_keras_module"] = tf.keras.Model.__module__

    def arrays(result):
        return [[list(a.shape), str(a.dtype), int(a.min()), int(a.max())]
                for split in result for a in split]

    out["mnist"] = arrays(tf.keras.datasets.mnist.load_data())
    out["mnist_path"] = arrays(mnist.load_data("MNIST-data"))
    out["cifar10"] = arrays(cifar10.load_data())
    (x1, y1), _ = mnist.load_data()
    (x2, y2), _ = mnist.load_data()
    out["deterministic"] = bool((x1 == x2).all() and (y1 == y2).all())
    x1[0, 0, 0] = 7  # copies: a caller may write into them
    out["writable"] = True
    # The label follows from the image: a nearest-class-mean classifier fitted on the training
    # split labels most test images correctly.
    (xt, yt), (xe, ye) = tf.keras.datasets.mnist.load_data()
    means = np.stack([xt[yt == k].mean(axis=0) for k in range(10)]).reshape(10, -1)
    dist = ((xe.reshape(len(xe), -1)[:, None, :].astype(np.float32) - means[None]) ** 2).sum(-1)
    out["nearest_mean_accuracy"] = float((dist.argmin(1) == ye).mean())

    import keras
    import tf_keras
    out["same_loader"] = [
        keras.datasets.mnist.load_data is uo.mnist_load_data,
        tf_keras.datasets.mnist.load_data is uo.mnist_load_data,
        tf.keras.datasets.mnist.load_data is uo.mnist_load_data,
        keras.datasets.cifar10.load_data is uo.cifar10_load_data,
        tf_keras.datasets.cifar10.load_data is uo.cifar10_load_data,
    ]

    import tensorflow_datasets as tfds
    tfds.disable_progress_bar()
    datasets, info = tfds.load(name="mnist", with_info=True, as_supervised=True)
    out["tfds_mnist_keys"] = sorted(datasets)
    spec = datasets["train"].element_spec
    out["tfds_mnist_spec"] = [[spec[0].shape.as_list(), spec[0].dtype.name],
                              [spec[1].shape.as_list(), spec[1].dtype.name]]
    out["tfds_mnist_counts"] = [info.splits["train"].num_examples,
                                info.splits["test"].num_examples,
                                int(datasets["test"].cardinality())]
    out["tfds_mnist_classes"] = info.features["label"].num_classes
    image, label = next(iter(datasets["train"]))
    out["tfds_mnist_first"] = [image.dtype.name, label.dtype.name]
    as_dict = tfds.load("mnist", split="test")
    out["tfds_mnist_dict"] = sorted(as_dict.element_spec)
    iris = tfds.load("iris", split=tfds.Split.TRAIN, as_supervised=True)
    spec = iris.element_spec
    labels = sorted({int(y) for _, y in iris})
    out["tfds_iris"] = [spec[0].shape.as_list(), spec[0].dtype.name, spec[1].dtype.name,
                        int(iris.cardinality()), labels]
    try:
        tfds.load("glue/mrpc")
        out["tfds_other"] = "loaded"
    except uo.OfflineDatasetUnavailable as exc:
        out["tfds_other"] = str(exc)
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1)
        out["network"] = "connected"
    except OSError as exc:
        out["network"] = str(exc)
    print("PROBE" + json.dumps(out))
""")


def _probe(legacy_keras: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update(PYTHONPATH=str(SCRIPTS), TF_CPP_MIN_LOG_LEVEL="3")
    if legacy_keras:
        env["TF_USE_LEGACY_KERAS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE"))
    return json.loads(line[len("PROBE") :])


@pytest.mark.parametrize("legacy_keras", [True, False], ids=["keras2", "keras3"])
@pytest.mark.slow
def test_offline_stand_ins(legacy_keras):
    pytest.importorskip("tensorflow")
    pytest.importorskip("tensorflow_datasets")
    pytest.importorskip("tf_keras")
    out = _probe(legacy_keras)

    # tf.keras is the flavour asked for, and the stand-ins load neither flavour by themselves.
    assert out["tf_keras_module"].startswith("tf_keras" if legacy_keras else "keras")
    assert out["tf_keras_loaded"] is legacy_keras
    assert out["keras_loaded"] is not legacy_keras

    mnist = [[[60000, 28, 28], "uint8", 0, 253], [[60000], "uint8", 0, 9],
             [[10000, 28, 28], "uint8", 0, 253], [[10000], "uint8", 0, 9]]
    for got, want in zip(out["mnist"], mnist, strict=True):
        assert got[:2] == want[:2]
        assert want[2] <= got[2] <= got[3] <= want[3]
    assert out["mnist_path"] == out["mnist"]
    cifar_shapes = [[[5000, 32, 32, 3], "uint8"], [[5000, 1], "uint8"],
                    [[1000, 32, 32, 3], "uint8"], [[1000, 1], "uint8"]]
    assert [a[:2] for a in out["cifar10"]] == cifar_shapes
    assert out["deterministic"] and out["writable"]
    assert out["nearest_mean_accuracy"] > 0.9
    assert out["same_loader"] == [True] * 5

    assert out["tfds_mnist_keys"] == ["test", "train"]
    assert out["tfds_mnist_spec"] == [[[28, 28, 1], "uint8"], [[], "int64"]]
    assert out["tfds_mnist_counts"] == [60000, 10000, 10000]
    assert out["tfds_mnist_classes"] == 10
    assert out["tfds_mnist_first"] == ["uint8", "int64"]
    assert out["tfds_mnist_dict"] == ["image", "label"]
    assert out["tfds_iris"] == [[4], "float32", "int64", 150, [0, 1, 2]]
    assert "no offline stand-in" in out["tfds_other"]
    assert "no network access" in out["network"]


def _list_excluded(*args: str) -> list[str]:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert upstream_tests.main(["--list-excluded", *args]) == 0
    return buffer.getvalue().splitlines()


def test_list_excluded_names_every_keras3_exclusion_with_its_reason():
    keras3_only = {**upstream_tests.KERAS3_EXCLUDED, **upstream_tests.KERAS3_DESELECTED}
    assert keras3_only
    for flag in ("3", "both"):
        lines = dict(line.split("\t", 1) for line in _list_excluded("--keras", flag))
        for test_id, reason in keras3_only.items():
            assert reason.strip()
            assert lines[test_id] == f"[Keras 3 only] {reason}"
    # Keras 2 runs them; the default listing is the full-suite one it always was.
    keras2 = _list_excluded("--keras", "2")
    default = _list_excluded()
    for test_id in keras3_only:
        assert not any(line.startswith(f"{test_id}\t") for line in keras2 + default)
    for test_id in {**upstream_tests.TF2_EXCLUDED, **upstream_tests.TF2_DESELECTED}:
        assert any(line.startswith(f"{test_id}\t") for line in keras2)
        assert not any(line.startswith(f"{test_id}\t") for line in default)


def test_keras3_exclusions_are_single_tests_of_the_selected_modules():
    for test_id in upstream_tests.KERAS3_DESELECTED:
        module, _, name = test_id.partition("::")
        assert name, f"{test_id}: Keras 3 exclusions name single tests"
        assert any(module == p or module.startswith(p + "/") for p in upstream_tests.TF2_PATHS)


def _commands(monkeypatch, selection):
    calls = []

    def fake_run(cmd, cwd=None, env=None, **kwargs):
        if "pytest" in cmd:
            calls.append((cmd, env))
        return subprocess.CompletedProcess(cmd, 0, stdout="/x/smdebug/__init__.py", stderr="")

    monkeypatch.setattr(upstream_tests.subprocess, "run", fake_run)
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    with contextlib.redirect_stdout(io.StringIO()):
        upstream_tests.run_pytest(Path("/tmp/x"), "python", Path("/tmp/j.xml"), [], selection)
    return calls[0]


def test_flavour_environments_and_default_run(monkeypatch):
    cmd, env = _commands(monkeypatch, None)
    assert "upstream_offline" not in cmd and cmd[-1] == "tests"
    assert "--timeout=120" in cmd and env["TF_USE_LEGACY_KERAS"] == "0"

    cmd, env = _commands(monkeypatch, upstream_tests.tf2_selection("2"))
    assert cmd[cmd.index("-p", cmd.index("no:cacheprovider")) + 1] == "upstream_offline"
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["PYTHONPATH"] == str(SCRIPTS)
    assert tuple(cmd[-len(upstream_tests.TF2_PATHS) :]) == upstream_tests.TF2_PATHS
    assert not any(a.startswith("--deselect=") and a[11:] in upstream_tests.KERAS3_DESELECTED
                   for a in cmd)

    cmd, env = _commands(monkeypatch, upstream_tests.tf2_selection("3"))
    assert "TF_USE_LEGACY_KERAS" not in env and "upstream_offline" in cmd
    for test_id in upstream_tests.KERAS3_DESELECTED:
        assert f"--deselect={test_id}" in cmd
    for path in upstream_tests.KERAS3_EXCLUDED:
        assert f"--ignore={path}" in cmd

    cmd, env = _commands(monkeypatch, upstream_tests.examples_selection("3"))
    assert env["UPSTREAM_OFFLINE_RESET_STATES"] == "1"
    assert tuple(cmd[-2:]) == upstream_tests.TF2_EXAMPLES
