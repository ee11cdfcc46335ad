"""Zero-code-change Keras: every ``Model.fit``/``evaluate``/``predict`` gets the job's hook as
one more callback. Both Kerases are covered: ``keras.Model`` (Keras 3, ``tf.keras`` on TF 2.16+)
and ``tf_keras.Model`` (Keras 2, ``tf.keras`` under ``TF_USE_LEGACY_KERAS=1``), once the script
imports it.

Nothing here imports TensorFlow until the script itself imports Keras.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from smdebug_lite.container.import_watch import when_imported
from smdebug_lite.log.logger import get_logger

logger = get_logger("container.attach_tensorflow")

_METHODS = ("fit", "evaluate", "predict")


def _with_hook(original, hook, callback_list: type):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        try:
            bound = signature.bind_partial(self, *args, **kwargs)
            callbacks = bound.arguments.get("callbacks")
            # fit hands its own CallbackList (with the hook in it) to evaluate for validation.
            if not hook.disabled and not isinstance(callbacks, callback_list):
                callbacks = list(callbacks or [])
                if not any(cb is hook for cb in callbacks):
                    bound.arguments["callbacks"] = [*callbacks, hook]
                    return original(*bound.args, **bound.kwargs)
        except TypeError:
            pass  # let Keras report the bad call itself
        return original(self, *args, **kwargs)

    method._smd_original = original  # type: ignore[attr-defined]
    return method


def _patch(keras_module, hook) -> None:
    model = keras_module.Model
    for name in _METHODS:
        current = getattr(model, name)
        if not hasattr(current, "_smd_original"):
            setattr(model, name, _with_hook(current, hook, keras_module.callbacks.CallbackList))


def _unpatch(keras_module) -> None:
    model = keras_module.Model
    for name in _METHODS:
        current = model.__dict__.get(name)
        if current is not None and hasattr(current, "_smd_original"):
            setattr(model, name, current._smd_original)


def attach(config_path: str) -> Any:
    """Create the Keras hook from `config_path` and add it to every Keras loop; returns the
    function that undoes this and closes the hook (None when there is no hook)."""
    import keras

    from smdebug_lite.tensorflow import get_hook

    hook = get_hook("keras", json_config_path=config_path, create_if_not_exists=True)
    if hook is None:
        return None
    patched = []

    def patch(keras_module) -> None:
        _patch(keras_module, hook)
        patched.append(keras_module)
        logger.info("smdebug-lite attached to %s %s; saving to %s", keras_module.__name__,
                    keras_module.__version__, hook.out_dir)

    patch(keras)
    when_imported("tf_keras", patch)

    def close() -> None:
        for keras_module in patched:
            _unpatch(keras_module)
        hook.close()

    return close


__all__ = ["attach"]
