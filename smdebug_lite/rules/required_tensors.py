"""Tensors (and steps) a rule declares it needs before `invoke_at_step` runs.

A rule's `set_required_tensors(step)` calls `self.req_tensors.add(...)`; the rule then waits
for those steps in each trial and reads every declared (tensor, step) once into the rule's
cache, so a missing tensor skips the step before any rule logic runs, and the rule's own reads
are served from memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from smdebug_lite.exceptions import TensorUnavailable, TensorUnavailableForStep
from smdebug_lite.rules.tensor_cache import TensorCache
from smdebug_lite.rules.trial_view import unwrap


class _ForTrial:
    def __init__(self, trial: Any) -> None:
        self.trial = trial  # what the rule sees (a view or a plain trial)
        self.steps: dict[str, list[int]] = {}
        self.tensors: dict[str, Any] = {}

    def add(self, name: str, steps: Iterable[int], should_match_regex: bool) -> None:
        steps = [int(s) for s in steps]
        if should_match_regex:
            names = self.trial.tensor_names(regex=[name])
        else:
            if not self.trial.has_tensor(name):
                raise TensorUnavailable(name)
            names = [name]
        for n in names:
            self.steps.setdefault(n, []).extend(s for s in steps if s not in self.steps.get(n, ()))
            if n not in self.tensors:
                self.tensors[n] = self.trial.tensor(n)

    def clear(self) -> None:
        self.steps.clear()
        self.tensors.clear()


class RequiredTensors:
    """Per-trial declarations: ``add(name, steps, trial=None, should_match_regex=False)``."""

    def __init__(self, base_trial: Any, other_trials: Iterable[Any] | None = None,
                 cache: TensorCache | None = None) -> None:
        self.base_trial = base_trial
        self._cache = cache
        self._per_trial: dict[int, _ForTrial] = {id(unwrap(base_trial)): _ForTrial(base_trial)}
        for t in other_trials or ():
            self._per_trial.setdefault(id(unwrap(t)), _ForTrial(t))

    def _get(self, trial: Any | None) -> _ForTrial:
        t = self.base_trial if trial is None else trial
        entry = self._per_trial.get(id(unwrap(t)))
        if entry is None:  # a trial the rule was not built with: accept it, like a new other trial
            entry = self._per_trial[id(unwrap(t))] = _ForTrial(t)
        return entry

    def add(self, name: str, steps: Iterable[int], trial: Any | None = None,
            should_match_regex: bool = False) -> None:
        """Declare `name` (or every tensor matching the regex `name`) at `steps`.

        Raises TensorUnavailable if a plain name is not in the trial (the step is skipped).
        """
        self._get(trial).add(name, steps, should_match_regex)

    def get_tensor_steps(self, name: str, trial: Any | None = None) -> list[int]:
        return self._get(trial).steps[name]

    def get_names(self, trial: Any | None = None) -> list[str]:
        return list(self._get(trial).steps)

    def get(self, trial: Any | None = None) -> list[Any]:
        """The declared Tensor objects of a trial."""
        return list(self._get(trial).tensors.values())

    def clear(self) -> None:
        for entry in self._per_trial.values():
            entry.clear()

    def fetch(self) -> None:
        """Wait for the declared steps, then read each declared (tensor, step) once.

        A tensor saved only as reductions at a step does not fail here: the rule may only want
        reductions. Any other missing value raises, so the invocation skips this step.
        """
        for entry in self._per_trial.values():
            if not entry.steps:
                continue
            needed = sorted({s for steps in entry.steps.values() for s in steps})
            raw = unwrap(entry.trial)
            raw.wait_for_steps(needed)
            for name, steps in entry.steps.items():
                for step in steps:
                    self._read(raw, entry, name, step)

    def _read(self, raw: Any, entry: _ForTrial, name: str, step: int) -> None:
        try:
            if self._cache is not None:
                self._cache.value(raw, name, step)
            else:
                entry.tensors[name].value(step)
        except TensorUnavailableForStep as e:
            if not e.has_reductions:
                raise
