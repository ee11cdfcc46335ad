"""``RequiredTensorsForTrial``: one trial's required tensors, the object smdebug's rules got from
``self.req_tensors`` per trial.

`RequiredTensors` keeps one of these per trial internally; this is the same bookkeeping with
smdebug's public per-trial interface, for code that builds or inspects one directly.
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView, ValuesView
from typing import Any

from smdebug_lite.log.logger import get_logger
from smdebug_lite.rules.required_tensors import _ForTrial

logger = get_logger(__name__)


class RequiredTensorsForTrial(_ForTrial):
    """Tensor name -> steps a rule needs from `trial`, and the Tensor objects for them."""

    def __init__(self, trial: Any) -> None:
        super().__init__(trial)
        self.logger = logger

    @property
    def _tensor_steps(self) -> dict[str, list[int]]:
        return self.steps

    @property
    def _tensors(self) -> dict[str, Any]:
        return self.tensors

    def add(self, name: str, steps: Iterable[int], should_match_regex: bool = False) -> None:
        """Require `name` (or every tensor the regex `name` matches) at `steps`; a plain name
        the trial does not have raises TensorUnavailable."""
        super().add(name, steps, should_match_regex)

    def get_tensor_steps(self, name: str) -> list[int]:
        return self.steps[name]

    def get_names(self) -> KeysView[str]:
        return self.steps.keys()

    def get(self) -> ValuesView[Any]:
        return self.tensors.values()

    def fetch(self) -> None:
        """Wait for every required step, then read each required value once (a value that is
        missing raises, so a rule invocation skips the step)."""
        needed = sorted({s for steps in self.steps.values() for s in steps})
        if needed:
            self.logger.debug("Waiting for required steps: %s", needed)
        self.trial.wait_for_steps(needed)
        for name, steps in self.steps.items():
            tensor = self.tensors[name]
            for step in steps:
                tensor.value(step)


__all__ = ["RequiredTensorsForTrial"]
