"""``SessionHook`` and ``EstimatorHook``: names kept so that code written for smdebug imports.

They were TensorFlow 1 hooks (``tf.compat.v1.Session`` run hooks and ``tf.estimator`` hooks);
TensorFlow 2.16+ has neither sessions nor estimators, so building one raises an error that says
what to use instead, rather than failing later inside TensorFlow.
"""

from __future__ import annotations

from typing import Any, NoReturn

from smdebug_lite.exceptions import SMDebugNotImplementedError

_INSTEAD = (
    "use smdebug.tensorflow.KerasHook instead: pass it to model.fit/evaluate/predict as a "
    "callback, or call hook.wrap_tape / hook.save_gradients in a custom training loop"
)


class _TF1Hook:
    """Refuses to exist: every way of building one raises SMDebugNotImplementedError."""

    _api = ""

    @classmethod
    def _refuse(cls) -> NoReturn:
        raise SMDebugNotImplementedError(
            f"{cls.__name__} hooks TensorFlow 1's {cls._api}, which TensorFlow 2.16 and later "
            f"do not have; {_INSTEAD}"
        )

    def __new__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        cls._refuse()

    @classmethod
    def create_from_json_file(cls, json_file_path: str | None = None) -> NoReturn:
        cls._refuse()

    hook_from_config = create_from_json_file


class SessionHook(_TF1Hook):
    """smdebug's ``tf.compat.v1.train.SessionRunHook`` (graph mode)."""

    _api = "tf.compat.v1.Session (a SessionRunHook)"


class EstimatorHook(SessionHook):
    """smdebug's hook for ``tf.estimator`` (a SessionHook subclass there too)."""

    _api = "tf.estimator (an Estimator hook)"


__all__ = ["EstimatorHook", "SessionHook"]
