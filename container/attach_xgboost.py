"""Zero-code-change XGBoost: ``xgboost.train`` (which the sklearn API's ``fit`` calls too) gets
the job's hook as one more callback. As SageMaker's XGBoost container did, the hook is also given
what it needs for the collections that depend on data: the training DMatrix (SHAP values), the
last evaluation set that is not the training set (predictions, labels) and the parameters
(hyperparameters), unless they were set already.

Nothing here imports XGBoost until the script itself does.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from smdebug_lite.log.logger import get_logger

logger = get_logger("container.attach_xgboost")

# Where `train` is looked up: the package, its module, and the sklearn wrapper's own import.
_HOMES = ("xgboost", "xgboost.training", "xgboost.sklearn")


def _feed(hook, params, dtrain, evals) -> None:
    if hook.train_data is None:
        hook.train_data = dtrain
    if hook.validation_data is None:
        others = [d for d, _ in (evals or []) if d is not dtrain]
        if others:
            hook.validation_data = others[-1]
    if hook.hyperparameters is None and params:
        try:
            hook.hyperparameters = dict(params)
        except (TypeError, ValueError):
            pass


def _with_hook(original, hook):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def train(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
            callbacks = list(bound.arguments.get("callbacks") or [])
            if not hook.disabled and not any(cb is hook for cb in callbacks):
                args_ = bound.arguments
                _feed(hook, args_.get("params"), args_.get("dtrain"), args_.get("evals"))
                bound.arguments["callbacks"] = [*callbacks, hook]
                return original(*bound.args, **bound.kwargs)
        except TypeError:
            pass  # let XGBoost report the bad call itself
        except Exception as e:  # never break training
            logger.error("smdebug-lite could not add its hook to xgboost.train: %s", e)
        return original(*args, **kwargs)

    train._smd_original = original  # type: ignore[attr-defined]
    return train


def attach(config_path: str) -> Any:
    """Create the XGBoost hook from `config_path` and add it to every ``xgboost.train``;
    returns the function that undoes this and closes the hook (None when there is no hook)."""
    import importlib

    import xgboost

    from smdebug_lite.xgboost import get_hook

    hook = get_hook(json_config_path=config_path, create_if_not_exists=True)
    if hook is None:
        return None
    patched = []
    for home in _HOMES:
        module = importlib.import_module(home)
        current = getattr(module, "train", None)
        if current is None or hasattr(current, "_smd_original"):
            continue
        module.train = _with_hook(current, hook)
        patched.append(module)
    logger.info("smdebug-lite attached to XGBoost %s; saving to %s", xgboost.__version__,
                hook.out_dir)

    def close() -> None:
        for module in patched:
            current = getattr(module, "train", None)
            if hasattr(current, "_smd_original"):
                module.train = current._smd_original
        hook.close()

    return close


__all__ = ["attach"]
