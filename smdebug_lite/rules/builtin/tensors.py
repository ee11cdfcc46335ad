"""Rules about tensor contents: TensorVariance, AllZero, UnchangedTensor, SimilarAcrossRuns."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.exceptions import StepUnavailable, TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import (
    GLOBAL,
    TRAIN,
    BuiltinRule,
    TensorSelection,
    global_step_of,
    mode_of,
)
from smdebug_lite.rules.params import (
    is_unset,
    parse_bool,
    parse_float,
    parse_int,
    parse_regex_list,
    parse_str_list,
)
from smdebug_lite.rules.trial_view import unwrap


def _selection(rule: str, collection_names: Any, tensor_regex: Any, *, required: bool
               ) -> tuple[TensorSelection, list[str]]:
    collections = parse_str_list(rule, "collection_names", collection_names)
    regexes = parse_regex_list(rule, "tensor_regex", tensor_regex)
    if required and not collections and not regexes:
        raise ValueError(f"{rule}: give collection_names or tensor_regex (both are empty)")
    return TensorSelection(collections, regexes, default_all=True), collections


class TensorVariance(BuiltinRule):
    """Fires when the variance of a tensor is above `max_threshold` or below `min_threshold`.

    Parameters: ``collection_names``, ``tensor_regex`` (default: every tensor),
    ``max_threshold``, ``min_threshold`` (floats; at least one is required). Collections:
    the selected ones (typically ``weights``); the ``variance`` reduction is enough.
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, max_threshold: str | None = None,
                 min_threshold: str | None = None, action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.selection, collections = _selection(r, collection_names, tensor_regex,
                                                 required=False)
        self.max_threshold = parse_float(r, "max_threshold", max_threshold, allow_none=True)
        self.min_threshold = parse_float(r, "min_threshold", min_threshold, allow_none=True)
        if self.max_threshold is None and self.min_threshold is None:
            raise ValueError(f"{r}: give max_threshold and/or min_threshold (both are None)")
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        max_threshold=self.max_threshold, min_threshold=self.min_threshold)

    def invoke_at_step(self, step: int) -> bool:
        for name, var in self.each_at(self.selection, step, self.reduction, "variance"):
            if self.max_threshold is not None and var > self.max_threshold:
                return self.flag(step, f"variance of {name} = {var:.4g} > {self.max_threshold:g}",
                                 tensor=name, variance=var)
            if self.min_threshold is not None and var < self.min_threshold:
                return self.flag(step, f"variance of {name} = {var:.4g} < {self.min_threshold:g}",
                                 tensor=name, variance=var)
        return False


class AllZero(BuiltinRule):
    """Fires when at least `threshold` percent of a tensor's values are zero.

    Parameters: ``collection_names``, ``tensor_regex`` (one of them is required),
    ``threshold`` (percent, default 100). Collections: the selected ones. Raw values are
    needed, except for threshold 100, which saved min/max (or abs max) reductions also prove.
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, threshold: str = "100",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.selection, collections = _selection(r, collection_names, tensor_regex,
                                                 required=True)
        self.threshold = parse_float(r, "threshold", threshold, min_value=0.0, max_value=100.0)
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        threshold=self.threshold)

    def _zero_percent(self, name: str, step: int) -> float | None:
        try:
            arr = self.value(name, step)
        except TensorUnavailableForStep:
            saved = self.cache.saved_reductions(self.raw_base, name, step)
            if saved.get(("max", True)) == 0 or (saved.get(("min", False)) == 0
                                                 and saved.get(("max", False)) == 0):
                return 100.0
            if saved.get(("l1", False)) == 0 or saved.get(("l2", False)) == 0:
                return 100.0
            return None
        if arr.size == 0:
            return None
        return 100.0 * float(np.count_nonzero(arr == 0)) / arr.size

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selection.names_at(self.raw_base, step):
            pct = self._zero_percent(name, step)
            if pct is not None and pct >= self.threshold:
                return self.flag(step, f"{pct:.4g}% of {name} is zero (>= {self.threshold:g}%)",
                                 tensor=name, zero_percent=pct)
        return False


class UnchangedTensor(BuiltinRule):
    """Fires when a tensor stays the same (``numpy.allclose``) over its last `num_steps` saved
    training steps (consecutive saved steps, not necessarily consecutive step numbers).

    Only TRAIN steps (or steps saved without a mode) are checked: weights legitimately stay
    constant during evaluation.

    Parameters: ``collection_names``, ``tensor_regex`` (default: every tensor), ``num_steps``
    (int >= 2, default 3), ``rtol`` (1e-5), ``atol`` (1e-8), ``equal_nan`` (False).
    Collections: the selected ones (raw values).
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, num_steps: str = "3", rtol: str = "1e-05",
                 atol: str = "1e-08", equal_nan: str = "False",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.selection, collections = _selection(r, collection_names, tensor_regex,
                                                 required=False)
        self.num_steps = parse_int(r, "num_steps", num_steps, min_value=2)
        self.rtol = parse_float(r, "rtol", rtol, min_value=0.0)
        self.atol = parse_float(r, "atol", atol, min_value=0.0)
        self.equal_nan = parse_bool(r, "equal_nan", equal_nan)
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        num_steps=self.num_steps, rtol=self.rtol, atol=self.atol,
                        equal_nan=self.equal_nan)

    def _previous_steps(self, name: str, step: int) -> list[int]:
        mode, mode_step = mode_of(self.raw_base, step)
        if mode not in (TRAIN, GLOBAL):
            return []
        tensor = self.raw_base.tensor(name)
        prev = tensor.prev_steps(mode_step, self.num_steps, mode=mode)
        out = [global_step_of(self.raw_base, mode, s) for s in prev]
        return [s for s in out if s is not None]

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selection.names_at(self.raw_base, step):
            steps = self._previous_steps(name, step)
            if len(steps) < self.num_steps or step not in steps:
                continue
            try:
                current = self.value(name, step)
                unchanged = True
                for s in steps:
                    if s == step:
                        continue
                    other = self.value(name, s)
                    if other.shape != current.shape or not np.allclose(
                            other, current, rtol=self.rtol, atol=self.atol,
                            equal_nan=self.equal_nan):
                        unchanged = False
                        break
            except TensorUnavailableForStep:
                continue
            if unchanged:
                return self.flag(step, f"{name} unchanged over steps {steps}", tensor=name,
                                 steps=steps)
        return False


class SimilarAcrossRuns(BuiltinRule):
    """Fires when a tensor differs between the base trial and another trial at the same step
    (shape mismatch or not ``numpy.allclose``); tensors or steps missing from either are
    skipped.

    Parameters: ``other_trials`` (required: a Trial, a list of Trials, or comma-separated
    trial paths; the first one is compared), ``collection_names``, ``tensor_regex`` (default:
    every tensor). Collections: the selected ones, saved in both runs at the same steps.
    """

    def __init__(self, base_trial: Any, other_trials: Any = None,
                 collection_names: str | None = None, tensor_regex: str | None = None,
                 action_str: str | None = None) -> None:
        others = self._resolve_trials(other_trials)
        super().__init__(base_trial, action_str=action_str, other_trials=others)
        r = self.rule_name
        self.selection, collections = _selection(r, collection_names, tensor_regex,
                                                 required=False)
        self.set_params(other_trials=[getattr(unwrap(t), "path", repr(t)) for t in others],
                        collection_names=collections, tensor_regex=tensor_regex)

    @staticmethod
    def _resolve_trials(other_trials: Any) -> list[Any]:
        if is_unset(other_trials) or (isinstance(other_trials, (list, tuple))
                                      and not other_trials):
            raise ValueError("SimilarAcrossRuns: parameter other_trials is required")
        if isinstance(other_trials, str):
            from smdebug_lite.trials import create_trial

            return [create_trial(p.strip()) for p in other_trials.split(",") if p.strip()]
        if isinstance(other_trials, (list, tuple)):
            return list(other_trials)
        return [other_trials]

    def invoke_at_step(self, step: int) -> bool:
        other = unwrap(self.other_trials[0])
        try:
            other.wait_for_steps([step])
        except StepUnavailable:
            return False
        other_names = set(other.tensor_names(step=step))
        for name in self.selection.names_at(self.raw_base, step):
            if name not in other_names:
                continue
            try:
                mine = self.value(name, step)
                theirs = self.value(name, step, trial=other)
            except TensorUnavailableForStep:
                continue
            if mine.shape != theirs.shape or not np.allclose(mine, theirs, equal_nan=True):
                return self.flag(step, f"{name} differs between the runs", tensor=name)
        return False
