"""Built-in rules on data our Keras and XGBoost hooks write from real training: each rule finds
the problem when it is there and stays quiet when it is not."""

from __future__ import annotations

import numpy as np
import pytest

from smdebug_lite.hooks import singleton
from smdebug_lite.rules import invoke_rule
from smdebug_lite.rules.builtin import get_builtin_rule
from smdebug_lite.trials import create_trial


@pytest.fixture(autouse=True)
def _fast_rules(monkeypatch):
    monkeypatch.setenv("SMDEBUG_RULE_POLL_INTERVAL_S", "0.05")
    singleton.del_hook()
    yield
    singleton.del_hook()


def run_rule(path: str, name: str, **params):
    rule = get_builtin_rule(name)(create_trial(path), **{k: str(v) for k, v in params.items()})
    return invoke_rule(rule)


# -- Keras ------------------------------------------------------------------------------------


def keras_run(tmp_path, name: str, lr: float, zero_init: bool = False, epochs: int = 8) -> str:
    pytest.importorskip("tensorflow")
    import keras

    from smdebug_lite.tensorflow import KerasHook, SaveConfig

    keras.utils.set_random_seed(0)
    init = "zeros" if zero_init else "glorot_uniform"
    model = keras.Sequential([
        keras.Input((5,)),
        keras.layers.Dense(8, activation="relu", kernel_initializer=init),
        keras.layers.Dense(1, kernel_initializer=init),
    ])
    model.compile(keras.optimizers.Adam(lr) if lr else keras.optimizers.SGD(0.0), "mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0, 1.5], dtype="float32"))[:, None]
    out = str(tmp_path / name)
    hook = KerasHook(out, save_config=SaveConfig(save_interval=1),
                     include_collections=["losses", "gradients"])
    model.fit(x, y, batch_size=16, epochs=epochs, validation_data=(x[:32], y[:32]), verbose=0,
              callbacks=[hook])
    hook.close()
    return out


@pytest.mark.slow
def test_loss_not_decreasing_on_keras(tmp_path):
    stuck = run_rule(keras_run(tmp_path, "stuck", lr=0.0), "LossNotDecreasing")
    assert stuck.status == "IssuesFound", stuck.message
    learning = run_rule(keras_run(tmp_path, "learning", lr=0.05), "LossNotDecreasing")
    assert learning.status == "NoIssuesFound", learning.message
    assert learning.steps_evaluated > 0


def test_vanishing_gradient_on_keras(tmp_path):
    dead = run_rule(keras_run(tmp_path, "dead", lr=0.01, zero_init=True, epochs=1),
                    "VanishingGradient")
    assert dead.status == "IssuesFound", dead.message
    healthy = run_rule(keras_run(tmp_path, "healthy", lr=0.01, epochs=1), "VanishingGradient")
    assert healthy.status == "NoIssuesFound", healthy.message
    assert healthy.steps_evaluated > 0


# -- XGBoost ----------------------------------------------------------------------------------


def xgb_run(tmp_path, name: str, x, y, params: dict, rounds: int, collections: list[str],
            validation=None) -> str:
    xgb = pytest.importorskip("xgboost")
    from smdebug_lite.xgboost import Hook, SaveConfig

    out = str(tmp_path / name)
    d = xgb.DMatrix(x, label=y)
    hook = Hook(out, save_config=SaveConfig(save_interval=2), include_collections=collections,
                validation_data=validation)
    xgb.train({**params, "seed": 0}, d, rounds, evals=[(d, "train")], callbacks=[hook],
              verbose_eval=False)
    hook.close()
    return out


def test_feature_importance_overweight_on_xgboost(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 10))
    dominated = x[:, 0] + 0.1 * x[:, 1:6].sum(axis=1)  # other features matter a little
    one = xgb_run(tmp_path, "one", x, dominated, {"max_depth": 4}, 6, ["feature_importance"])
    assert run_rule(one, "FeatureImportanceOverweight").status == "IssuesFound"
    spread = xgb_run(tmp_path, "spread", x, x.sum(axis=1), {"max_depth": 3}, 6,
                     ["feature_importance"])
    result = run_rule(spread, "FeatureImportanceOverweight")
    assert result.status == "NoIssuesFound", result.message
    assert result.steps_evaluated > 0


def test_tree_depth_on_xgboost(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 6))
    y = np.sin(3 * x[:, 0]) * x[:, 1] + x[:, 2] ** 2
    deep = xgb_run(tmp_path, "deep", x, y, {"max_depth": 7}, 4, ["trees"])
    assert run_rule(deep, "TreeDepth", depth=4).status == "IssuesFound"
    shallow = xgb_run(tmp_path, "shallow", x, y, {"max_depth": 3}, 4, ["trees"])
    result = run_rule(shallow, "TreeDepth", depth=4)
    assert result.status == "NoIssuesFound", result.message
    assert result.steps_evaluated > 0


def test_class_imbalance_on_xgboost(tmp_path):
    rng = np.random.default_rng(3)
    params = {"objective": "multi:softmax", "num_class": 2, "max_depth": 3}
    x = rng.normal(size=(600, 4))
    skewed_y = (x[:, 0] > 1.7).astype(np.float32)  # about 4% positives
    skewed = xgb_run(tmp_path, "skewed", x, skewed_y, params, 4, ["labels", "predictions"],
                     validation=(x, skewed_y))
    assert run_rule(skewed, "ClassImbalance").status == "IssuesFound"
    balanced_y = (x[:, 0] > 0).astype(np.float32)
    balanced = xgb_run(tmp_path, "balanced", x, balanced_y, params, 4, ["labels", "predictions"],
                       validation=(x, balanced_y))
    result = run_rule(balanced, "ClassImbalance")
    assert result.status == "NoIssuesFound", result.message
    assert result.steps_evaluated > 0
