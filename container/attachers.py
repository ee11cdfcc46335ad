"""Framework attachers: how the launcher hooks into a framework the script imports.

An attacher names the top-level module whose import triggers it and a function that, given the
hook config path, creates the framework's hook and wires it into the framework without changes
to the user's code. It returns a function that closes the hook (or None when it attached
nothing). To support another framework, append an `Attacher` to ATTACHERS (or call
`register_attacher`), e.g. one for ``tensorflow`` wrapping ``keras.Model.fit`` or one for
``xgboost`` adding a callback to ``xgboost.train``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Closer = Callable[[], None]


@dataclass(frozen=True)
class Attacher:
    framework: str
    module: str  # top-level module whose import triggers `attach`
    attach: Callable[[str], Closer | None]
    also: tuple[str, ...] = ()  # other modules whose import triggers it (whichever comes first)

    @property
    def modules(self) -> tuple[str, ...]:
        return (self.module, *self.also)


def _attach_pytorch(config_path: str) -> Closer | None:
    from smdebug_lite.container.attach_pytorch import attach

    return attach(config_path)


ATTACHERS: list[Attacher] = [Attacher("pytorch", "torch", _attach_pytorch)]


def register_attacher(attacher: Attacher) -> None:
    """Add (or replace, by framework name) an attacher."""
    ATTACHERS[:] = [a for a in ATTACHERS if a.framework != attacher.framework] + [attacher]


# TensorFlow/Keras and XGBoost (their modules import no framework until attach() runs).
from smdebug_lite.container import attach_tensorflow, attach_xgboost  # noqa: E402

# Keras 2 scripts (TF_USE_LEGACY_KERAS=1) may import tf_keras without importing Keras 3.
register_attacher(Attacher("tensorflow", "keras", attach_tensorflow.attach, also=("tf_keras",)))
register_attacher(Attacher("xgboost", "xgboost", attach_xgboost.attach))


__all__ = ["ATTACHERS", "Attacher", "Closer", "register_attacher"]
