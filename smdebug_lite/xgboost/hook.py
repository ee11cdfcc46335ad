"""The XGBoost hook: an ``xgboost.callback.TrainingCallback`` over the HookCore.

Step = boosting round (``after_iteration``'s epoch), mode GLOBAL, default save interval 10, as in
smdebug. Tensor names and shapes are smdebug's (docs/xgboost.md): ``full_shap/<feature>`` holds
the whole ``pred_contribs`` matrix, (rows, features + 1) with the bias column last, as smdebug
saved it. Fixed here: every tree of a round is dumped (multi-class, num_parallel_tree), metric
names with digits (the sklearn API's ``validation_0-logloss``) and features whose names end
in a, b, i, s or / are saved (smdebug's regexes dropped them).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import xgboost as xgb

from smdebug_lite.config.arguments import type_error
from smdebug_lite.config.collection import Collection, CollectionKeys
from smdebug_lite.exceptions import SMDebugError
from smdebug_lite.hooks.arguments import check_reduction_config, hook_constructor
from smdebug_lite.hooks.core import HookCore
from smdebug_lite.log.logger import get_logger
from smdebug_lite.xgboost.trees import COLUMNS, round_tree_table

logger = get_logger(__name__)

K = CollectionKeys
IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
# Metrics that grow as the model improves are not losses (smdebug excluded auc and map).
INCREASING_METRICS = frozenset({"auc", "aucpr", "map", "ndcg", "pre"})
_TREE_BOOSTERS = frozenset({"gbtree", "dart"})


def metric_name(eval_name: str, metric: str) -> str:
    return f"{eval_name}-{metric}"


def is_loss_metric(metric: str) -> bool:
    return metric.split("@")[0].rstrip("-") not in INCREASING_METRICS


def _as_dmatrix(data: Any, argument: str) -> xgb.DMatrix | None:
    """None, a DMatrix, (file path, "csv"|"libsvm") as in smdebug, or (X, y) / X in memory."""
    if data is None or isinstance(data, xgb.DMatrix):
        return data
    if isinstance(data, tuple) and data and isinstance(data[0], (str, os.PathLike)):
        path = os.path.expanduser(os.fspath(data[0]))
        content = (data[1] if len(data) > 1 else "csv").lower().split(";")[0].strip()
        if content in ("csv", "text/csv"):
            uri = f"{path}?format=csv&label_column=0"
        elif content in ("libsvm", "text/libsvm", "text/x-libsvm"):
            uri = f"{path}?format=libsvm"
        else:
            raise SMDebugError(f"{argument}=({path!r}, {data[1]!r}): content type must be 'csv' "
                               "or 'libsvm'")
        if not os.path.isfile(path):
            raise SMDebugError(f"{argument}: {path} is not a local file")
        return xgb.DMatrix(uri)
    if isinstance(data, tuple) and len(data) == 2:
        return xgb.DMatrix(data[0], label=data[1])
    try:
        return xgb.DMatrix(data)
    except Exception as e:
        raise SMDebugError(f"{argument} must be an xgboost.DMatrix, (path, content_type), (X, y) "
                           f"or X; got {type(data).__name__}: {e}") from e


def _hyperparameter_value(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, (bool, int, float, np.number)):
        return np.array([value])
    if isinstance(value, str):
        return np.array([value])
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return np.asarray(value)
    return np.array([json.dumps(value, default=str) if isinstance(value, (dict, list, tuple))
                     else str(value)])


class Hook(HookCore, xgb.callback.TrainingCallback):
    """``xgboost.train(params, dtrain, callbacks=[hook])`` or ``XGBClassifier(callbacks=[hook])``."""

    framework = "xgboost"
    default_save_interval = 10

    @hook_constructor(optional_out_dir=True, untyped=("reduction_config",))
    def __init__(
        self,
        shared: dict[str, Any],
        hyperparameters: Mapping[str, Any] | None = None,
        train_data: Any = None,
        validation_data: Any = None,
    ) -> None:
        # XGBoost's own arguments are checked before the hook is registered anywhere; the
        # shared ones in HookCore (hooks/arguments.py).
        reduction_config = shared.pop("reduction_config")
        check_reduction_config(reduction_config)
        if hyperparameters is not None and not isinstance(hyperparameters, Mapping):
            raise type_error("hyperparameters", hyperparameters, "a dict of names to values")
        train_dmatrix = _as_dmatrix(train_data, "train_data")
        validation_dmatrix = _as_dmatrix(validation_data, "validation_data")
        self._init_kwargs = dict(
            shared, hyperparameters=dict(hyperparameters) if hyperparameters else None)
        HookCore.__init__(self, reduction_config=None, **shared)
        xgb.callback.TrainingCallback.__init__(self)
        if reduction_config is not None:
            logger.warning("XGBoost hook: reduction_config is not supported and is ignored")
        self.hyperparameters = dict(hyperparameters) if hyperparameters else None
        self.train_data = train_dmatrix
        self.validation_data = validation_dmatrix
        self._roles: dict[str, frozenset[str]] = {}
        self._warned: set[str] = set()
        self._booster_type: str | None = None
        self._feature_names: list[str] | None = None

    @classmethod
    def hook_from_config(cls, json_config_path: str | None = None) -> Hook:
        """smdebug's XGBoost spelling of create_from_json_file."""
        return cls.create_from_json_file(json_config_path)

    @classmethod
    def _json_default_values(cls) -> dict[str, Any]:
        return {"save_interval": cls.default_save_interval}  # XGBoost's is 10

    @classmethod
    def _json_hook_kwargs(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if k != "reduction_config"}  # no reductions here

    # -- workers ------------------------------------------------------------------------------

    def _worker_name(self) -> str:
        try:
            if xgb.collective.is_distributed():
                return f"worker_{xgb.collective.get_rank()}"
        except Exception:
            pass
        return "worker_0"

    def _num_workers(self) -> int:
        try:
            if xgb.collective.is_distributed():
                return int(xgb.collective.get_world_size())
        except Exception:
            pass
        return 1

    # -- collection membership ----------------------------------------------------------------

    def _add_role(self, name: str, *collections: str) -> None:
        roles = frozenset(collections)
        if self._roles.get(name) != roles:
            self._roles[name] = roles
            self.plans.forget(name)

    def _collections_of(self, included: list[Collection], name: str) -> list[Collection]:
        roles = self._roles.get(name, frozenset())
        return [c for c in included if c.name in roles or c.matches(name)]

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    # -- model facts ----------------------------------------------------------------------------

    def _learn_model(self, model: xgb.Booster) -> None:
        if self._booster_type is None:
            try:
                config = json.loads(model.save_config())
                self._booster_type = config["learner"]["gradient_booster"]["name"]
            except Exception:
                self._booster_type = "gbtree"
        names = model.feature_names
        if names is None:
            names = [f"f{i}" for i in range(model.num_features())]
        if names != self._feature_names:
            self._feature_names = list(names)
            for f in self._feature_names:  # saved even when smdebug's [^/bias]$ regex drops them
                self._add_role(f"average_shap/{f}", K.AVERAGE_SHAP)
                self._add_role(f"full_shap/{f}", K.FULL_SHAP)

    # -- writing ----------------------------------------------------------------------------------

    def _save(self, name: str, value: np.ndarray) -> None:
        plan = self.plan(name)
        if plan is not None:
            self.write(plan, raw=value, shape=value.shape)

    def _wants(self, name: str) -> bool:
        """Would `name` be saved now? (No side effects, unlike plan().)"""
        return not self.disabled and self.plans.wants(name)

    def _save_metrics(self, evals_log: Mapping) -> None:
        for eval_name, metrics in (evals_log or {}).items():
            for metric, history in metrics.items():
                if not history:
                    continue
                value = history[-1]
                if isinstance(value, tuple):  # xgb.cv: (mean, std)
                    value = value[0]
                name = metric_name(eval_name, metric)
                roles = (K.METRICS, K.LOSSES) if is_loss_metric(metric) else (K.METRICS,)
                self._add_role(name, *roles)
                self._save(name, np.array([float(value)]))

    def _save_hyperparameters(self) -> None:
        if not self.hyperparameters:
            if self._wants("hyperparameters/_"):
                self._warn_once("hp", "XGBoost hook: pass hyperparameters=... to save the "
                                      "'hyperparameters' collection")
            return
        for key, value in self.hyperparameters.items():
            arr = _hyperparameter_value(value)
            if arr is not None:
                self._save(f"hyperparameters/{key}", arr)

    def _save_validation(self, model: xgb.Booster) -> None:
        want_pred, want_labels = self._wants("predictions"), self._wants("labels")
        if not (want_pred or want_labels):
            return
        if self.validation_data is None:
            self._warn_once("val", "XGBoost hook: pass validation_data=... to save predictions "
                                   "and labels")
            return
        if want_pred:
            self._save("predictions", np.asarray(model.predict(self.validation_data)))
        if want_labels:
            self._save("labels", np.asarray(self.validation_data.get_label()))

    def _save_feature_importance(self, model: xgb.Booster) -> None:
        probe = f"feature_importance/weight/{(self._feature_names or ['f0'])[0]}"
        if not self._wants(probe):
            return
        if self._booster_type not in _TREE_BOOSTERS:
            self._warn_once("fi", f"XGBoost hook: feature importance is not defined for booster "
                                  f"{self._booster_type!r}")
            return
        for kind in IMPORTANCE_TYPES:
            scores = model.get_score(importance_type=kind)
            total = float(sum(scores.values()))
            if not total:
                continue
            for feature, score in scores.items():
                self._save(f"feature_importance/{kind}/{feature}", np.array([score / total]))

    def _save_trees(self, model: xgb.Booster) -> None:
        if not self._wants("trees/Tree"):
            return
        if self._booster_type not in _TREE_BOOSTERS:
            self._warn_once("trees", f"XGBoost hook: booster {self._booster_type!r} has no trees")
            return
        table = round_tree_table(model)
        for column in COLUMNS:
            self._save(f"trees/{column}", table[column])

    def _save_shap(self, model: xgb.Booster, full: bool = True, average: bool = True) -> None:
        """SHAP values of train_data, as smdebug saved them: ``full_shap/<feature>`` is the whole
        pred_contribs array ((rows, features + 1), or (rows, classes, features + 1)), the same
        for every feature; ``average_shap/<feature>`` is that feature's mean, shape (1,)."""
        columns = [*(self._feature_names or []), "bias"]  # pred_contribs' last column is the bias
        wanted = [(i, f, full and self._wants(f"full_shap/{f}"),
                   average and self._wants(f"average_shap/{f}"))
                  for i, f in enumerate(columns)]
        wanted = [w for w in wanted if w[2] or w[3]]
        if not wanted:
            return
        if self.train_data is None:
            self._warn_once("shap", "XGBoost hook: pass train_data=... to save SHAP values")
            return
        contribs = np.ascontiguousarray(model.predict(self.train_data, pred_contribs=True))
        for i, f, want_full, want_average in wanted:
            if want_full:
                self._save(f"full_shap/{f}", contribs)
            if want_average:
                self._save(f"average_shap/{f}", np.array([contribs[..., i].mean()]))

    # -- smdebug's public writers (each saves only when this round is a saved step) -----------

    def write_hyperparameters(self) -> None:
        self._save_hyperparameters()

    def write_metrics(self, evals_log: Mapping) -> None:
        self._save_metrics(evals_log)

    write_losses = write_metrics  # one pass files each metric under metrics and, if one, losses

    def write_predictions(self, model: xgb.Booster) -> None:
        if self.validation_data is not None and self._wants("predictions"):
            self._save("predictions", np.asarray(model.predict(self.validation_data)))

    def write_labels(self) -> None:
        if self.validation_data is not None and self._wants("labels"):
            self._save("labels", np.asarray(self.validation_data.get_label()))

    def write_feature_importances(self, model: xgb.Booster) -> None:
        self._learn_model(model)
        self._save_feature_importance(model)

    def write_full_shap(self, model: xgb.Booster) -> None:
        self._learn_model(model)
        self._save_shap(model, average=False)

    def write_average_shap(self, model: xgb.Booster) -> None:
        self._learn_model(model)
        self._save_shap(model, full=False)

    def write_tree_model(self, model: xgb.Booster, epoch: int | None = None) -> None:
        self._learn_model(model)
        self._save_trees(model)

    # -- TrainingCallback --------------------------------------------------------------------------

    def before_training(self, model):
        self._build_if_unpickled()
        return model

    def after_iteration(self, model, epoch: int, evals_log) -> bool:
        """Save this round's tensors when the round is a saved step; never stops training."""
        if self.disabled:
            return False
        with self.failsafe("after_iteration"):
            self.set_step(epoch)
            if self.saving_this_step:
                self._save_hyperparameters()
                self._save_metrics(evals_log)
                if isinstance(model, xgb.Booster):
                    self._learn_model(model)
                    self._save_validation(model)
                    self._save_feature_importance(model)
                    self._save_trees(model)
                    self._save_shap(model)
                else:  # xgb.cv: one booster per fold; only the (mean) metrics are one model's
                    self._warn_once("cv", "XGBoost hook: with xgboost.cv only metrics (fold "
                                          "means) and hyperparameters are saved")
            self.end_step()
        return False

    def after_training(self, model):
        """Hand the last round to the writer and wait until it is on disk (or uploaded)."""
        if not self.disabled:
            with self.failsafe("after_training"):
                self.end_step()
                if self.trial_writer is not None:
                    self.trial_writer.flush()
        return model

    # -- copies: sklearn clones estimators, joblib pickles them ------------------------------------

    def __deepcopy__(self, memo):
        """A hook is one output stream; ``sklearn.base.clone`` must share it, not copy it."""
        return self

    def __getstate__(self) -> dict:
        """Pickle the configuration only; the unpickled hook starts writing only if it is used
        for training again (so unpickling a trained model never opens the out_dir)."""
        return {"_smd_pickled_kwargs": copy.copy(self._init_kwargs)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(self.inert_state(),
                             _smd_pickled_kwargs=state.get("_smd_pickled_kwargs"))

    def _build_if_unpickled(self) -> None:
        kwargs = self.__dict__.pop("_smd_pickled_kwargs", None)
        if kwargs is None:
            return
        try:
            self.__init__(**kwargs)  # type: ignore[misc]
        except Exception as e:
            self.disabled = True
            logger.error("smdebug-lite: an unpickled XGBoost hook could not start writing to %s "
                         "(%s: %s); training continues without it", kwargs.get("out_dir"),
                         type(e).__name__, e)


__all__ = ["IMPORTANCE_TYPES", "Hook", "is_loss_metric", "metric_name"]
