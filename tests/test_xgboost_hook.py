"""XGBoost hook on real XGBoost 3: xgboost.train and the sklearn API, every collection checked
against what the booster itself reports."""

from __future__ import annotations

import json
import logging
import pickle
import threading

import numpy as np
import pytest
from lazy_module import lazy, loaded, require_module

from smdebug_lite.trials import create_trial

require_module("xgboost")
xgb = lazy("xgboost")
smd_xgb = lazy("smdebug_lite.xgboost")
xgboost_hook_module = lazy("smdebug_lite.xgboost.hook")
xgb_trees = lazy("smdebug_lite.xgboost.trees")

ALL = ["hyperparameters", "metrics", "losses", "predictions", "labels", "feature_importance",
       "trees", "full_shap", "average_shap"]
FEATURES = ["alpha", "b", "c", "d", "e"]  # "alpha"/"b" end in characters smdebug's regex drops


pytestmark = pytest.mark.usefixtures("no_current_hook")


def classification_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(FEATURES)))
    y = np.digitize(x[:, 0] + 0.5 * x[:, 2] + 0.3 * rng.normal(size=n), [-0.5, 0.5])
    return x, y.astype(np.float32)


def regression_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    return x, (2 * x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=n)).astype(np.float32)


def test_train_multiclass_saves_every_collection(tmp_path):
    x, y = classification_data(300, 0)
    xv, yv = classification_data(100, 1)
    dtrain = xgb.DMatrix(x, label=y, feature_names=FEATURES)
    dval = xgb.DMatrix(xv, label=yv, feature_names=FEATURES)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "eta": 0.3,
              "num_parallel_tree": 2, "eval_metric": ["mlogloss", "merror", "auc"], "seed": 0}
    hook = smd_xgb.Hook(str(tmp_path / "run"), save_config=smd_xgb.SaveConfig(save_interval=2),
                include_collections=ALL, hyperparameters=params, train_data=dtrain,
                validation_data=dval)
    evals_result: dict = {}
    booster = xgb.train(params, dtrain, 5, evals=[(dtrain, "train"), (dval, "validation")],
                        evals_result=evals_result, callbacks=[hook], verbose_eval=False)
    hook.close()

    trial = create_trial(str(tmp_path / "run"))
    assert trial.steps() == [0, 2, 4]
    metrics = set(trial.tensor_names(collection="metrics"))
    assert metrics == {f"{s}-{m}" for s in ("train", "validation")
                       for m in ("mlogloss", "merror", "auc")}
    assert set(trial.tensor_names(collection="losses")) == {
        n for n in metrics if not n.endswith("auc")}
    frame = booster.trees_to_dataframe()
    per_round = 3 * 2  # num_class * num_parallel_tree
    for step in trial.steps():
        for eval_name, results in evals_result.items():
            for metric, history in results.items():
                value = trial.tensor(f"{eval_name}-{metric}").value(step)
                np.testing.assert_allclose(value, [history[step]])
        assert trial.tensor("hyperparameters/max_depth").value(step).tolist() == [3]
        assert trial.tensor("hyperparameters/objective").value(step).tolist() == ["multi:softprob"]
        upto = booster[:step + 1]
        np.testing.assert_allclose(trial.tensor("predictions").value(step), upto.predict(dval),
                                   rtol=1e-6)
        np.testing.assert_array_equal(trial.tensor("labels").value(step), yv)
        for kind in xgboost_hook_module.IMPORTANCE_TYPES:
            scores = upto.get_score(importance_type=kind)
            total = sum(scores.values())
            saved = {f: trial.tensor(f"feature_importance/{kind}/{f}").value(step)[0]
                     for f in scores}
            np.testing.assert_allclose([saved[f] for f in scores],
                                       [scores[f] / total for f in scores], rtol=1e-12)
        expected = frame[(frame.Tree >= step * per_round) & (frame.Tree < (step + 1) * per_round)]
        assert sorted(set(trial.tensor("trees/Tree").value(step).tolist())) == list(
            range(step * per_round, (step + 1) * per_round))
        for column in ("Tree", "Node", "Split", "Gain", "Cover"):
            np.testing.assert_allclose(trial.tensor(f"trees/{column}").value(step),
                                       expected[column].to_numpy(dtype=float), rtol=1e-6)
        for column in ("ID", "Feature", "Yes", "No", "Missing"):
            want = ["nan" if isinstance(v, float) else v for v in expected[column]]
            assert trial.tensor(f"trees/{column}").value(step).tolist() == want
        contribs = upto.predict(dtrain, pred_contribs=True)  # (samples, classes, features + 1)
        for i, feature in enumerate(FEATURES):
            full = trial.tensor(f"full_shap/{feature}").value(step)
            np.testing.assert_allclose(full, contribs, rtol=1e-6)  # the whole matrix, as smdebug
            np.testing.assert_allclose(trial.tensor(f"average_shap/{feature}").value(step),
                                       [contribs[..., i].mean()], rtol=1e-5)
    assert {f"trees/{c}" for c in xgb_trees.COLUMNS} <= set(trial.tensor_names(collection="trees"))
    assert "full_shap/bias" not in trial.tensor_names()  # the bias column is not a feature


def test_sklearn_regressor_metrics_and_default_interval(tmp_path):
    x, y = regression_data(200, 2)
    xv, yv = regression_data(80, 3)
    hook = smd_xgb.Hook(str(tmp_path / "reg"), include_collections=["metrics", "predictions", "labels",
                                                            "trees", "feature_importance"],
                validation_data=(xv, yv))
    model = xgb.XGBRegressor(n_estimators=12, max_depth=2, eval_metric="rmse", callbacks=[hook])
    model.fit(x, y, eval_set=[(x, y), (xv, yv)], verbose=False)
    hook.close()

    trial = create_trial(str(tmp_path / "reg"))
    assert trial.steps() == [0, 10]  # XGBoost's default save interval is 10
    history = model.evals_result()
    for step in (0, 10):
        for eval_name in ("validation_0", "validation_1"):
            np.testing.assert_allclose(trial.tensor(f"{eval_name}-rmse").value(step),
                                       [history[eval_name]["rmse"][step]])
        np.testing.assert_allclose(trial.tensor("predictions").value(step),
                                   model.get_booster()[:step + 1].predict(xgb.DMatrix(xv)),
                                   rtol=1e-6)
        assert set(trial.tensor("trees/Tree").value(step).tolist()) == {step}
        np.testing.assert_allclose(trial.tensor("labels").value(step), yv)
    assert "feature_importance/weight/f0" in trial.tensor_names()


def test_sklearn_classifier_clone_and_pickle(tmp_path):
    sklearn_base = pytest.importorskip("sklearn.base")
    x, y = classification_data(150, 4)
    out = tmp_path / "clf"
    hook = smd_xgb.Hook(str(out), save_config=smd_xgb.SaveConfig(save_interval=1),
                include_collections=["metrics", "predictions", "labels"], validation_data=(x, y))
    model = xgb.XGBClassifier(n_estimators=3, max_depth=2, objective="multi:softmax",
                              callbacks=[hook])
    clone = sklearn_base.clone(model)  # deep-copies parameters: the hook itself is shared
    assert clone.get_params()["callbacks"][0] is hook
    clone.fit(x, y, eval_set=[(x, y)], verbose=False)
    restored = pickle.loads(pickle.dumps(clone))  # the hook pickles as its configuration
    hook.close()
    np.testing.assert_array_equal(restored.predict(x), clone.predict(x))
    assert restored.get_params()["callbacks"][0].disabled  # never touches the finished out_dir

    trial = create_trial(str(out))
    assert trial.steps() == [0, 1, 2]
    np.testing.assert_allclose(trial.tensor("validation_0-mlogloss").value(2),
                               [clone.evals_result()["validation_0"]["mlogloss"][2]])
    np.testing.assert_array_equal(trial.tensor("predictions").value(2), clone.predict(x))


def test_json_config_and_get_hook(tmp_path):
    config = {"LocalPath": str(tmp_path / "json"), "HookParameters": {},
              "CollectionConfigurations": [{"CollectionName": "feature_importance"},
                                           {"CollectionName": "trees",
                                            "CollectionParameters": {"save_steps": "3"}}]}
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    hook = smd_xgb.get_hook(json_config_path=str(path))
    assert isinstance(hook, smd_xgb.Hook) and smd_xgb.get_hook(str(path)) is hook
    x, y = regression_data(100, 5)
    xgb.train({"max_depth": 2}, xgb.DMatrix(x, label=y), 12,
              evals=[(xgb.DMatrix(x, label=y), "train")], callbacks=[hook], verbose_eval=False)
    hook.close()
    trial = create_trial(config["LocalPath"])
    assert trial.steps() == [0, 3, 10]
    assert trial.tensor("train-rmse").steps() == [0, 10]  # metrics: always, hook interval
    assert trial.tensor("trees/Node").steps() == [0, 3, 10]  # save_steps adds to the interval
    assert trial.tensor("feature_importance/gain/f0").steps() == [0, 10]
    assert smd_xgb.get_hook(str(tmp_path / "missing.json")) is hook  # the existing hook is reused


def test_no_config_means_no_hook(tmp_path, monkeypatch):
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "absent.json"))
    assert smd_xgb.get_hook() is None


def test_failure_never_stops_training(tmp_path, caplog, monkeypatch):
    hook = smd_xgb.Hook(str(tmp_path / "broken"), save_config=smd_xgb.SaveConfig(save_interval=1),
                include_collections=["trees"])

    def broken(model):
        raise RuntimeError("tree dump exploded")

    monkeypatch.setattr(loaded(xgboost_hook_module), "round_tree_table", broken)
    x, y = regression_data(60, 6)
    with caplog.at_level(logging.ERROR):
        booster = xgb.train({"max_depth": 2}, xgb.DMatrix(x, label=y), 4, callbacks=[hook])
    assert booster.num_boosted_rounds() == 4
    assert hook.disabled
    assert any("tree dump exploded" in r.getMessage() for r in caplog.records)
    hook.close()


def test_s3_out_dir(s3_bucket, s3_endpoint):
    out = f"s3://{s3_bucket}/jobs/xgb"
    hook = smd_xgb.Hook(out, save_config=smd_xgb.SaveConfig(save_interval=2), include_collections=["metrics"])
    x, y = regression_data(80, 7)
    result: dict = {}
    xgb.train({"max_depth": 2}, xgb.DMatrix(x, label=y), 4,
              evals=[(xgb.DMatrix(x, label=y), "train")], evals_result=result, callbacks=[hook],
              verbose_eval=False)
    hook.close()
    trial = create_trial(out)
    assert trial.steps() == [0, 2]
    np.testing.assert_allclose(trial.tensor("train-rmse").value(2), [result["train"]["rmse"][2]])


def test_collective_ranks_name_the_workers(tmp_path):
    """Two workers of a real XGBoost collective (threads, as XGBoost's own tests run them)."""
    from xgboost.tracker import RabitTracker

    tracker = RabitTracker(n_workers=2, host_ip="127.0.0.1")
    tracker.start()
    args = tracker.worker_args()
    x, y = regression_data(120, 8)
    errors: list[BaseException] = []

    def worker(rank: int) -> None:
        try:
            with xgb.collective.CommunicatorContext(**args, dmlc_task_id=str(rank)):
                part = slice(rank * 60, (rank + 1) * 60)
                hook = smd_xgb.Hook(str(tmp_path / "dist"), save_config=smd_xgb.SaveConfig(save_interval=1),
                            include_collections=["metrics"], include_workers="all")
                d = xgb.DMatrix(x[part], label=y[part])
                xgb.train({"max_depth": 2}, d, 2, evals=[(d, "train")], callbacks=[hook],
                          verbose_eval=False)
                hook.close()
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    tracker.wait_for(timeout=60)
    assert not errors, errors
    trial = create_trial(str(tmp_path / "dist"))
    assert sorted(trial.workers()) == ["worker_0", "worker_1"]
    assert trial.num_workers == 2
    assert trial.steps() == [0, 1]


def test_cv_saves_fold_mean_metrics(tmp_path):
    x, y = regression_data(90, 9)
    hook = smd_xgb.Hook(str(tmp_path / "cv"), save_config=smd_xgb.SaveConfig(save_interval=1),
                include_collections=["metrics", "trees"])
    result = xgb.cv({"max_depth": 2}, xgb.DMatrix(x, label=y), 3, nfold=3, callbacks=[hook])
    hook.close()
    assert not hook.disabled
    trial = create_trial(str(tmp_path / "cv"))
    assert trial.steps() == [0, 1, 2]
    np.testing.assert_allclose([trial.tensor("test-rmse").value(s)[0] for s in range(3)],
                               result["test-rmse-mean"], rtol=1e-12)
    assert not [n for n in trial.tensor_names() if n.startswith("trees/")]
