"""Keras and XGBoost rows for bench/bench_hook.py (registered there with `register`).

    .venv/bin/python bench/bench_hook.py --only keras,keras2   # Keras 3, then Keras 2 (tf_keras)
    .venv/bin/python bench/bench_hook.py --only xgboost

Keras: ms per ``fit`` step of a 4-layer MLP (256 wide, batch 64, one CPU thread), no hook vs
weights+gradients+losses saved every step / every 10 steps (gradients come from the instrumented
step function, see smdebug_lite/tensorflow/capture.py). The same model and rows run on Keras 3
(``keras``) and on Keras 2 (the ``tf_keras`` package, as a ``TF_USE_LEGACY_KERAS=1`` script gets
it). smdebug 1.0.34 cannot run on TF 2.21 (nor save gradients in TF2 ``fit``), so its Keras
column is n/a.

XGBoost: ms per boosting round (5000 x 20 binary classification, depth 6, hist, one thread),
no hook vs the default collection (metrics) vs every collection but SHAP (metrics, predictions
and labels of 1000 validation rows, feature importance, trees, hyperparameters) every round /
every 10 rounds, and with average and full SHAP on 500 rows every 10 rounds (XGBoost's own
``pred_contribs`` dominates that row, in both libraries). smdebug 1.0.34 runs in the reference venv with xgboost 3.0; its hook imports
``pkg_resources``, absent there, so the worker provides the one function it uses
(``parse_version``) from ``packaging``.

Nothing here imports a framework at module level: the same file runs as the worker in both venvs.
"""

from __future__ import annotations

import math
import sys
import time
import types
from collections.abc import Callable

ALL_XGB = ["metrics", "predictions", "labels", "feature_importance", "trees", "average_shap",
           "full_shap", "hyperparameters"]


def _keras_rows(framework: str) -> list[tuple[str, str, dict, int | None]]:
    common = {"include_collections": ["weights", "biases", "gradients", "losses"]}
    return [
        (framework, "no hook", {"hook": False}, None),
        (framework, "weights+grads+losses, every step", {**common, "interval": 1}, 1),
        (framework, "weights+grads+losses, every 10 steps", {**common, "interval": 10}, 10),
        (framework, "layer outputs, every 10 steps",
         {"include_collections": ["layers"], "interval": 10}, 10),
    ]


def keras_rows() -> list[tuple[str, str, dict, int | None]]:
    return _keras_rows("keras")


def keras2_rows() -> list[tuple[str, str, dict, int | None]]:
    return _keras_rows("keras2")


NO_SHAP_XGB = [c for c in ALL_XGB if not c.endswith("_shap")]


def xgboost_rows() -> list[tuple[str, str, dict, int | None]]:
    return [
        ("xgboost", "no hook", {"hook": False}, None),
        ("xgboost", "metrics (default), every round",
         {"include_collections": ["metrics"], "interval": 1}, 1),
        ("xgboost", "all but SHAP, every round",
         {"include_collections": NO_SHAP_XGB, "interval": 1}, 1),
        ("xgboost", "all but SHAP, every 10 rounds",
         {"include_collections": NO_SHAP_XGB, "interval": 10}, 10),
        ("xgboost", "all + SHAP (500 rows), every 10 rounds",
         {"include_collections": ALL_XGB, "interval": 10}, 10),
    ]


def keras_worker(pkg: str, config: dict, steps: int, warmup: int, out_dir: str,
                 keras_module: str = "keras") -> dict:
    if pkg != "smdebug_lite":  # smdebug 1.0.34 cannot import TensorFlow 2.21
        return {"ms_per_step": math.nan, "close_ms": math.nan}
    import importlib
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras = importlib.import_module(keras_module)

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((256,))] + [
        keras.layers.Dense(256, activation="relu") for _ in range(3)] + [keras.layers.Dense(10)])
    model.compile(keras.optimizers.SGD(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 256)).astype("float32")
    y = rng.integers(0, 10, size=512)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).repeat()
    callbacks = []
    hook = None
    if config.get("hook", True):
        smd = __import__(f"{pkg}.tensorflow", fromlist=["KerasHook"])
        hook = smd.KerasHook(out_dir, save_config=smd.SaveConfig(save_interval=config["interval"]),
                             include_collections=config["include_collections"])
        callbacks = [hook]
    model.fit(data, steps_per_epoch=warmup, epochs=1, verbose=0, callbacks=callbacks)
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
    elapsed = time.perf_counter() - start
    close_s = 0.0
    if hook is not None:
        t = time.perf_counter()
        hook.close()
        close_s = time.perf_counter() - t
    return {"ms_per_step": 1000 * elapsed / steps, "close_ms": 1000 * close_s}


def keras2_worker(pkg: str, config: dict, steps: int, warmup: int, out_dir: str) -> dict:
    return keras_worker(pkg, config, steps, warmup, out_dir, keras_module="tf_keras")


def _pkg_resources_shim() -> None:
    """smdebug.xgboost imports pkg_resources only for parse_version."""
    if "pkg_resources" in sys.modules:
        return
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        from packaging.version import parse

        sys.modules["pkg_resources"] = types.SimpleNamespace(parse_version=parse)  # type: ignore[assignment]


def xgboost_worker(pkg: str, config: dict, steps: int, warmup: int, out_dir: str) -> dict:
    import numpy as np
    import xgboost as xgb

    rng = np.random.default_rng(0)
    x = rng.normal(size=(6000, 20))
    y = (x[:, 0] + x[:, 1] * x[:, 2] + 0.5 * rng.normal(size=6000) > 0).astype(np.float32)
    dtrain = xgb.DMatrix(x[:5000], label=y[:5000])
    dval = xgb.DMatrix(x[5000:], label=y[5000:])
    dshap = xgb.DMatrix(x[:500], label=y[:500])
    params = {"objective": "binary:logistic", "max_depth": 6, "tree_method": "hist",
              "nthread": 1, "eval_metric": ["logloss", "auc"], "seed": 0}

    def make_hook(run_dir: str):
        if not config.get("hook", True):
            return []
        if pkg == "smdebug":
            _pkg_resources_shim()
        smd = __import__(f"{pkg}.xgboost", fromlist=["Hook"])
        return [smd.Hook(out_dir=run_dir, save_config=smd.SaveConfig(save_interval=config["interval"]),
                         include_collections=config["include_collections"],
                         hyperparameters=params, train_data=dshap, validation_data=dval)]

    evals = [(dtrain, "train"), (dval, "validation")]
    warm = make_hook(out_dir + "-warmup")
    xgb.train(params, dtrain, warmup, evals=evals, callbacks=warm, verbose_eval=False)
    for h in warm:
        h.close()
    hooks = make_hook(out_dir)
    start = time.perf_counter()
    xgb.train(params, dtrain, steps, evals=evals, callbacks=hooks, verbose_eval=False)
    elapsed = time.perf_counter() - start
    t = time.perf_counter()
    for h in hooks:
        h.close()
    close_s = time.perf_counter() - t
    return {"ms_per_step": 1000 * elapsed / steps, "close_ms": 1000 * close_s}


ROW_FUNCTIONS = [keras_rows, keras2_rows, xgboost_rows]
WORKERS: dict[str, Callable[..., dict]] = {"keras": keras_worker, "keras2": keras2_worker,
                                           "xgboost": xgboost_worker}


def register(row_functions: list, workers: dict, scenario: type) -> None:
    """Add the Keras and XGBoost rows to bench_hook.py's tables."""
    for rows in ROW_FUNCTIONS:
        row_functions.append(lambda rows=rows: [scenario(*r) for r in rows()])
    workers.update(WORKERS)


__all__ = ["ROW_FUNCTIONS", "WORKERS", "register"]
