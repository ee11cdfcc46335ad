"""A pytest plugin that lets smdebug 1.0.34's TensorFlow tests and examples run offline.

``scripts/upstream_tests.py`` loads it (``-p upstream_offline`` with this directory on
PYTHONPATH) for its TensorFlow 2 runs; it is never written into the upstream tree. At configure
time it replaces the dataset loaders those programs call with deterministic synthetic data of the
same API, per-example shapes and dtypes:

* ``mnist.load_data(path=...)`` of ``keras.datasets``, ``tf_keras.datasets`` and
  ``tensorflow.keras.datasets`` (which is one of the two, as ``TF_USE_LEGACY_KERAS`` says):
  x uint8 (60000, 28, 28) / (10000, 28, 28), y uint8 in 0..9. The full counts are kept: tests
  reshape to ``(60000, 784)`` and check batch shapes of 60000 / 10 examples;
* ``cifar10.load_data()``: x uint8 (N, 32, 32, 3), y uint8 (N, 1) in 0..9, with N = 5000 / 1000
  (the programs that use it take a few batches);
* ``tensorflow_datasets.load``: ``"mnist"`` (image uint8 (28, 28, 1), label int64; ``with_info``
  gives ``splits[...].num_examples`` and ``features["label"].num_classes``) and ``"iris"``
  (features float32 (4,), label int64 in 0..2, split ``train`` only); any other name raises
  ``OfflineDatasetUnavailable``. ``tfds.disable_progress_bar`` becomes a no-op.

Each image is its class's fixed pattern plus noise, so labels follow from the inputs and a few
training steps raise accuracy. Sockets may connect only to the loopback interface: anything
else fails at once with ``OSError`` instead of reaching the network.

With ``UPSTREAM_OFFLINE_RESET_STATES=1`` (set for the published example programs only), Keras 3
metrics get back ``reset_states()``, the name Keras 2 used for what Keras 3 calls
``reset_state()``.
"""

from __future__ import annotations

import functools
import importlib.abc
import ipaddress
import os
import socket
import sys
from typing import Any

import numpy as np

MNIST_COUNTS = {"train": 60000, "test": 10000}
CIFAR10_COUNTS = {"train": 5000, "test": 1000}
IRIS_COUNT = 150
RESET_STATES_ENV = "UPSTREAM_OFFLINE_RESET_STATES"

# Module names whose ``load_data`` attribute is the real loader (public API modules re-export the
# private implementation); imported eagerly so every alias exists before the patch.
_KERAS_DATASET_MODULES = {
    "mnist": (
        "keras.src.datasets.mnist",
        "keras.datasets.mnist",
        "keras._tf_keras.keras.datasets.mnist",
        "tf_keras.src.datasets.mnist",
        "tf_keras.datasets.mnist",
    ),
    "cifar10": (
        "keras.src.datasets.cifar10",
        "keras.datasets.cifar10",
        "keras._tf_keras.keras.datasets.cifar10",
        "tf_keras.src.datasets.cifar10",
        "tf_keras.datasets.cifar10",
    ),
}


class OfflineDatasetUnavailable(RuntimeError):
    """A dataset the offline run has no stand-in for (it would have been downloaded)."""


# ---------------------------------------------------------------------------------------------
# The synthetic data
# ---------------------------------------------------------------------------------------------


def _class_images(
    pattern_seed: int, seed: int, count: int, shape: tuple[int, ...], classes: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uint8 images of ``shape``: their class's bright pattern (the same in every split
    of a dataset) plus noise."""
    patterns = (np.random.default_rng(pattern_seed).random((classes, *shape)) < 0.3).astype(
        np.uint8
    ) * 190
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=count, dtype=np.uint8)
    images = patterns[labels]
    images += rng.integers(0, 64, size=images.shape, dtype=np.uint8)
    return images, labels


@functools.cache
def _mnist_arrays() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    train = _class_images(28, 1234, MNIST_COUNTS["train"], (28, 28))
    test = _class_images(28, 5678, MNIST_COUNTS["test"], (28, 28))
    for array in (*train, *test):
        array.setflags(write=False)
    return train, test


@functools.cache
def _cifar10_arrays() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    splits = []
    for seed, count in ((4321, CIFAR10_COUNTS["train"]), (8765, CIFAR10_COUNTS["test"])):
        x, y = _class_images(32, seed, count, (32, 32, 3))
        y = y.reshape(-1, 1)
        x.setflags(write=False)
        y.setflags(write=False)
        splits.append((x, y))
    return splits[0], splits[1]


@functools.cache
def _iris_arrays() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(150)
    centers = np.array(
        [[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]], dtype=np.float32
    )
    labels = np.repeat(np.arange(3, dtype=np.int64), IRIS_COUNT // 3)
    rng.shuffle(labels)
    features = centers[labels] + rng.normal(0.0, 0.25, size=(IRIS_COUNT, 4)).astype(np.float32)
    return features.astype(np.float32), labels


def mnist_load_data(path: str = "mnist.npz") -> Any:
    """Stand-in for ``keras.datasets.mnist.load_data``: fresh, writable copies each call."""
    del path  # the cache file name; nothing is read or written
    (x_train, y_train), (x_test, y_test) = _mnist_arrays()
    return (x_train.copy(), y_train.copy()), (x_test.copy(), y_test.copy())


def cifar10_load_data() -> Any:
    """Stand-in for ``keras.datasets.cifar10.load_data``."""
    (x_train, y_train), (x_test, y_test) = _cifar10_arrays()
    return (x_train.copy(), y_train.copy()), (x_test.copy(), y_test.copy())


_STAND_INS = {"mnist": mnist_load_data, "cifar10": cifar10_load_data}


# ---------------------------------------------------------------------------------------------
# tensorflow_datasets
# ---------------------------------------------------------------------------------------------


class OfflineDatasetInfo:
    """What the tests read from ``tfds.load(..., with_info=True)``'s info."""

    def __init__(self, name: str, features: Any, splits: Any, supervised_keys: tuple) -> None:
        self.name = name
        self.full_name = name
        self.features = features
        self.splits = splits
        self.supervised_keys = supervised_keys

    def __repr__(self) -> str:
        return f"OfflineDatasetInfo(name={self.name!r}, splits={list(self.splits)})"


def _tfds_info(name: str) -> OfflineDatasetInfo:
    import tensorflow_datasets as tfds

    if name == "mnist":
        features = tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(28, 28, 1)),
                "label": tfds.features.ClassLabel(num_classes=10),
            }
        )
        counts = MNIST_COUNTS
        keys = ("image", "label")
    else:
        features = tfds.features.FeaturesDict(
            {
                "features": tfds.features.Tensor(shape=(4,), dtype=np.float32),
                "label": tfds.features.ClassLabel(names=["setosa", "versicolor", "virginica"]),
            }
        )
        counts = {"train": IRIS_COUNT}
        keys = ("features", "label")
    splits = tfds.core.SplitDict(
        [tfds.core.SplitInfo(name=s, shard_lengths=[n], num_bytes=0) for s, n in counts.items()]
    )
    return OfflineDatasetInfo(name, features, splits, keys)


def _tfds_split(name: str, split: str, as_supervised: bool) -> Any:
    import tensorflow as tf

    if name == "mnist":
        (x_train, y_train), (x_test, y_test) = _mnist_arrays()
        x, y = {"train": (x_train, y_train), "test": (x_test, y_test)}[split]
        inputs = tf.constant(x[..., np.newaxis])
        keys = ("image", "label")
    else:
        if split != "train":
            raise ValueError(f"Unknown split {split!r}: iris has only 'train'")
        x, y = _iris_arrays()
        inputs = tf.constant(x)
        keys = ("features", "label")
    labels = tf.constant(y.astype(np.int64))
    if as_supervised:
        return tf.data.Dataset.from_tensor_slices((inputs, labels))
    return tf.data.Dataset.from_tensor_slices({keys[0]: inputs, keys[1]: labels})


def tfds_load(
    name: str,
    *,
    split: Any = None,
    data_dir: Any = None,
    batch_size: int | None = None,
    shuffle_files: bool = False,
    download: bool = True,
    as_supervised: bool = False,
    with_info: bool = False,
    **_ignored: Any,
) -> Any:
    """Stand-in for ``tensorflow_datasets.load`` for ``mnist`` and ``iris``."""
    del data_dir, shuffle_files, download
    base = str(name).split(":")[0].split("/")[0]
    if base not in ("mnist", "iris"):
        raise OfflineDatasetUnavailable(
            f"tfds.load({name!r}): no offline stand-in for this dataset (it would be downloaded)"
        )
    info = _tfds_info(base)

    def one(split_name: Any) -> Any:
        split_name = str(split_name)
        if split_name not in info.splits:
            raise ValueError(f"Unknown split {split_name!r}; available: {list(info.splits)}")
        dataset = _tfds_split(base, split_name, as_supervised)
        return dataset.batch(batch_size) if batch_size else dataset

    if split is None:
        result: Any = {s: one(s) for s in info.splits}
    elif isinstance(split, (list, tuple)):
        result = [one(s) for s in split]
    else:
        result = one(split)
    return (result, info) if with_info else result


def _no_progress_bar() -> None:
    """Stand-in for ``tfds.disable_progress_bar``: nothing is downloaded, nothing to show."""


# ---------------------------------------------------------------------------------------------
# Installing the stand-ins
# ---------------------------------------------------------------------------------------------


def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:  # not installed
        return None


_WATCHED = {name: dataset for dataset, names in _KERAS_DATASET_MODULES.items() for name in names}


def _own_loader(module: Any) -> Any:
    # The module's own attribute only: TensorFlow's lazy modules import on attribute access.
    return (getattr(module, "__dict__", None) or {}).get("load_data")


def _patch_module(module: Any, dataset: str) -> bool:
    if _own_loader(module) is None:
        return False
    module.load_data = _STAND_INS[dataset]
    return True


def _patch_loaded_keras_datasets() -> list[str]:
    """Patch the dataset modules already imported, and every module holding their loaders."""
    originals: dict[Any, str] = {}
    for name, dataset in _WATCHED.items():
        loader = _own_loader(sys.modules.get(name))
        if loader is not None and loader is not _STAND_INS[dataset]:
            originals[loader] = dataset
    patched = []
    for name, module in list(sys.modules.items()):
        loader = _own_loader(module)
        dataset = _WATCHED.get(name) or (originals.get(loader) if loader is not None else None)
        if dataset is not None and loader is not _STAND_INS[dataset]:
            _patch_module(module, dataset)
            patched.append(name)
    return patched


class _PatchingLoader(importlib.abc.Loader):
    """Runs a dataset module's own loader, then puts the stand-in into it."""

    def __init__(self, inner: Any, dataset: str) -> None:
        self._inner = inner
        self._dataset = dataset

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _patch_module(module, self._dataset)

    def __getattr__(self, name: str) -> Any:  # get_filename, get_source, is_package, ...
        return getattr(self._inner, name)


class _DatasetModuleFinder(importlib.abc.MetaPathFinder):
    """Patches a Keras dataset module when it is first imported, so neither Keras flavour is
    imported only to be patched (a Keras 2 run never loads Keras 3, and the other way round)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        dataset = _WATCHED.get(fullname)
        if dataset is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _PatchingLoader(spec.loader, dataset)
        return spec


_FINDER = _DatasetModuleFinder()


def _patch_keras_datasets() -> list[str]:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return _patch_loaded_keras_datasets()


def _patch_tfds() -> bool:
    tfds = _import("tensorflow_datasets")
    if tfds is None:
        return False
    tfds.load = tfds_load
    tfds.disable_progress_bar = _no_progress_bar
    return True


def _restore_reset_states() -> None:
    """Keras 3 renamed ``Metric.reset_states()`` to ``reset_state()``; give the old name back."""
    keras = _import("keras")
    metric = getattr(getattr(keras, "metrics", None), "Metric", None)
    if metric is not None and not hasattr(metric, "reset_states"):

        def reset_states(self: Any) -> None:
            self.reset_state()

        metric.reset_states = reset_states


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths and the like
        return True
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise OSError(f"offline run: connection to {address!r} refused (no network access)")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise OSError(f"offline run: connection to {address!r} refused (no network access)")
    return _real_connect_ex(self, address)


def install() -> dict[str, Any]:
    """Put every stand-in in place; returns what was patched (for tests and the run's log)."""
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    result: dict[str, Any] = {"keras_modules": _patch_keras_datasets(), "tfds": _patch_tfds()}
    if os.environ.get(RESET_STATES_ENV) == "1":
        _restore_reset_states()
        result["reset_states"] = True
    return result


def pytest_configure(config: Any) -> None:
    install()


def pytest_report_header(config: Any) -> str:
    return "upstream_offline: synthetic mnist / cifar10 / tfds datasets, no network"
