"""Zero-code-change Keras: every ``Model.fit``/``evaluate``/``predict`` gets the job's hook as
one more callback (``tf.keras.Model`` is ``keras.Model`` in TF 2.16+, so both are covered).

Nothing here imports TensorFlow until the script itself imports Keras.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from smdebug_lite.logger import get_logger

logger = get_logger("launcher.attach_tensorflow")

_METHODS = ("fit", "evaluate", "predict")


def _with_hook(original, hook):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        import keras

        try:
            bound = signature.bind_partial(self, *args, **kwargs)
            callbacks = bound.arguments.get("callbacks")
            # fit hands its own CallbackList (with the hook in it) to evaluate for validation.
            if not hook.disabled and not isinstance(callbacks, keras.callbacks.CallbackList):
                callbacks = list(callbacks or [])
                if not any(cb is hook for cb in callbacks):
                    bound.arguments["callbacks"] = [*callbacks, hook]
                    return original(*bound.args, **bound.kwargs)
        except TypeError:
            pass  # let Keras report the bad call itself
        return original(self, *args, **kwargs)

    method._smd_original = original  # type: ignore[attr-defined]
    return method


def attach(config_path: str) -> Any:
    """Create the Keras hook from `config_path` and add it to every Keras loop; returns the
    function that undoes this and closes the hook (None when there is no hook)."""
    import keras

    from smdebug_lite.tensorflow import get_hook

    hook = get_hook("keras", json_config_path=config_path, create_if_not_exists=True)
    if hook is None:
        return None
    for name in _METHODS:
        current = getattr(keras.Model, name)
        if not hasattr(current, "_smd_original"):
            setattr(keras.Model, name, _with_hook(current, hook))
    logger.info("smdebug-lite attached to Keras %s; saving to %s", keras.__version__, hook.out_dir)

    def close() -> None:
        for name in _METHODS:
            current = keras.Model.__dict__.get(name)
            if current is not None and hasattr(current, "_smd_original"):
                setattr(keras.Model, name, current._smd_original)
        hook.close()

    return close


__all__ = ["attach"]
