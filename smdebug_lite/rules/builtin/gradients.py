"""Rules about gradient and tensor magnitudes: VanishingGradient, ExplodingTensor."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.exceptions import TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import BuiltinRule, TensorSelection
from smdebug_lite.rules.params import parse_bool, parse_float, parse_regex_list, parse_str_list


class VanishingGradient(BuiltinRule):
    """Fires when the mean absolute value of any gradient falls below `threshold`.

    Parameters: ``threshold`` (float, default 1e-7).
    Collections: ``gradients`` (raw tensors, or at least the ``abs_mean`` reduction).
    """

    def __init__(self, base_trial: Any, threshold: str = "0.0000001",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.threshold = parse_float(self.rule_name, "threshold", threshold, min_value=0.0)
        self.set_params(threshold=self.threshold)
        self.selection = TensorSelection(collections=["gradients"])

    def invoke_at_step(self, step: int) -> bool:
        for name, abs_mean in self.each_reduction_at(self.selection, step, "mean", abs=True):
            if abs_mean < self.threshold:
                return self.flag(step, f"mean(|{name}|) = {abs_mean:.3g} < {self.threshold:g}",
                                 tensor=name, abs_mean=abs_mean)
        return False


# Saved reductions that stay finite for any finite tensor (a product easily overflows).
_FINITE_REDUCTIONS = {"min", "max", "mean", "std", "variance", "sum", "l1", "l2"}


class ExplodingTensor(BuiltinRule):
    """Fires when a tensor holds NaN, or also +/-inf unless `only_nan`.

    Parameters: ``collection_names`` (comma-separated), ``tensor_regex`` (comma-separated
    regexes), both default None meaning every saved tensor; ``only_nan`` (bool, default False).
    Collections: whatever is selected (typically ``gradients``, ``weights``, ``losses``). Where
    every worker saved the ``num_nan`` (and, unless `only_nan`, ``num_inf``) counts of a tensor
    at a step, those are read instead of the tensor, and the first worker with a nonzero count
    is named. Otherwise the raw tensor is checked; with only other reductions saved, a
    non-finite reduction (other than prod) counts.

    When a worker wrote a non-finite record (``detect_non_finite``, `format.non_finite`), the
    earliest one decides first: the condition is met at the first evaluated step at or after the
    record's step (its own step, which the hook saved), with the record as the evidence
    (`only_nan` ignores a record without NaN). Without a record it behaves as above.
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, only_nan: str = "False",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        collections = parse_str_list(self.rule_name, "collection_names", collection_names)
        regexes = parse_regex_list(self.rule_name, "tensor_regex", tensor_regex)
        self.only_nan = parse_bool(self.rule_name, "only_nan", only_nan)
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        only_nan=self.only_nan)
        self.selection = TensorSelection(collections, regexes, default_all=True)
        # The saved counts `_from_counts` looks at (the other saved reductions are not read).
        self._counts = (("num_nan", False),) if self.only_nan else (("num_nan", False),
                                                                    ("num_inf", False))

    def _bad(self, arr: np.ndarray) -> bool:
        if arr.dtype.kind not in "fc":
            return False
        # The ufuncs `.any()` / `.all()` call, without their Python wrappers (once per tensor
        # and step).
        if self.only_nan:
            return bool(np.logical_or.reduce(np.isnan(arr), axis=None))
        return not bool(np.logical_and.reduce(np.isfinite(arr), axis=None))

    def _saved_counts(self, name: str, step: int,
                      worker: str | None = None) -> tuple[float, float] | None:
        """(NaN count, Inf count) one worker (None: the only one) saved, None when it saved
        none (the Inf count is 0 with `only_nan`)."""
        saved = self.cache.saved_reductions(self.raw_base, name, step, worker=worker,
                                            only=self._counts)
        nan = saved.get(("num_nan", False))
        inf = 0.0 if self.only_nan else saved.get(("num_inf", False))
        return None if nan is None or inf is None else (nan, inf)

    def _from_counts(self, name: str, step: int) -> tuple[str, int, int] | bool | None:
        """(worker, NaN count, Inf count) of the first worker whose saved counts are nonzero,
        False when every worker's counts are zero, None when some worker has no counts."""
        trial = self.raw_base
        if getattr(trial, "num_workers", 2) <= 1:
            # One writer: its counts, else None; the worker is named only when they are not 0.
            counts = self._saved_counts(name, step)
            if counts is None:
                return None
            if not any(counts):
                return False
        try:
            workers = self.cache.tensor(trial, name).workers(step)
        except (TensorUnavailableForStep, KeyError, ValueError):
            return None
        for worker in workers:
            counts = self._saved_counts(name, step, worker)
            if counts is None:
                return None
            nan, inf = counts
            if nan or inf:
                return worker, int(nan), int(inf)
        return False

    def _from_record(self, step: int) -> bool:
        first = getattr(self.raw_base, "first_non_finite", None)
        record = first() if first is not None else None
        if record is None or record.step > step or (self.only_nan and not record.nan):
            return False
        return self.flag(step, f"first non-finite value: {record.describe()}",
                         tensor=record.tensor, worker=record.worker, num_nan=record.nan,
                         num_inf=record.posinf + record.neginf, record=record.to_dict())

    def _counts_saved(self, step: int) -> bool:
        """False when no tensor's NaN count was saved at the step (asked once, not per
        tensor); True when some may have been."""
        has = getattr(self.raw_base, "has_saved_reduction", None)
        return True if has is None else has(step, "num_nan")

    def invoke_at_step(self, step: int) -> bool:
        if self._from_record(step):
            return True
        counts = self._counts_saved(step)
        for name in self.selection.names_at(self.raw_base, step):
            counted = self._from_counts(name, step) if counts else None
            if counted is False:
                continue
            if counted is not None:
                worker, nan, inf = counted
                what = " and ".join(([f"{nan} NaN"] if nan else [])
                                    + ([f"{inf} infinite values"] if inf else []))
                return self.flag(step, f"{name} contains {what} (worker {worker})",
                                 tensor=name, worker=worker, num_nan=nan, num_inf=inf)
            try:
                arr = self.value(name, step)
            except TensorUnavailableForStep:
                saved = self.cache.saved_reductions(self.raw_base, name, step)
                values = np.array([v for (red, _), v in saved.items()
                                   if self.only_nan or red in _FINITE_REDUCTIONS], dtype=float)
                if values.size and self._bad(values):
                    return self.flag(step, f"a saved reduction of {name} is not finite",
                                     tensor=name)
                continue
            if self._bad(arr):
                kind = "NaN" if np.isnan(arr).any() else "infinite values"
                return self.flag(step, f"{name} contains {kind}", tensor=name)
        return False
