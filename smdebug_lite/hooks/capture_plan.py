"""Which tensors a hook saves, and how: the included collections, which of them match a name,
and the `TensorPlan` of a name at the current step (cached per set of saving collections).

A plan depends only on the name and on which collections save this step, so there is one
plan cache per set of saving collections: steps alternating between sets (weights every 10
steps, losses every step) reuse their plans. A plan is never mutated once built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from smdebug_lite.config.collection import (
    NON_HISTOGRAM_COLLECTIONS,
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    SM_METRIC_COLLECTIONS,
    Collection,
)

_MAX_PLAN_CACHES = 64


@dataclass(slots=True)
class TensorPlan:
    """What to write for one tensor at the current step, merged over its collections."""

    name: str
    save_raw: bool = False
    reductions: list[tuple[str, bool]] = field(default_factory=list)
    save_shape: bool = False
    histogram: bool = False
    tb_scalar: bool = False
    sm_metric: bool = False  # also sent to SageMaker Metrics (losses, metrics, sm_metrics)
    collections: list[Collection] = field(default_factory=list)
    # the explicitly included collections whose TensorBoard histograms show this tensor
    histogram_in: tuple[str, ...] = ()


def matches_by_regex(included: list[Collection], name: str) -> list[Collection]:
    return [c for c in included if c.matches(name)]


class CapturePlan:
    """The included collections of a hook and the plans of the current step's saving set.

    `match(included, name)` says which included collections hold a tensor; adapters that
    decide membership by what a tensor is (Keras weights, XGBoost metrics) pass their own and
    call `forget(name)` when a tensor's role changes."""

    def __init__(self, match: Callable[[list[Collection], str], list[Collection]] = matches_by_regex) -> None:
        self.match = match
        self.included: list[Collection] = []
        self.explicit_ids: frozenset[int] = frozenset()  # of collections included by name
        self.saving: list[Collection] = []  # the included collections that save this step
        self.saving_ids: frozenset[int] = frozenset()
        self.cache: dict[str, TensorPlan | None] = {}  # the plans of the saving set
        self.caches: dict[frozenset[int], dict[str, TensorPlan | None]] = {}
        self.matched: set[str] = set()  # names of collections that matched some tensor
        self._key: frozenset[int] = frozenset()
        self._match_cache: dict[str, list[Collection]] = {}

    def set_included(self, included: list[Collection], explicit_ids: frozenset[int]) -> None:
        """The collections changed: every match and plan is worked out again."""
        self.included = included
        self.explicit_ids = explicit_ids
        self._match_cache.clear()
        self.caches.clear()
        self.cache = self.caches[self._key] = {}

    def matching(self, name: str) -> list[Collection]:
        found = self._match_cache.get(name)
        if found is None:
            found = self._match_cache[name] = self.match(self.included, name)
        return found

    def forget(self, name: str) -> None:
        """The collections of `name` may have changed."""
        self._match_cache.pop(name, None)

    def set_saving(self, saving: list[Collection]) -> None:
        self.saving = saving
        ids = frozenset(map(id, saving))
        if ids != self._key:
            self._key = ids
            cache = self.caches.get(ids)
            if cache is None:
                if len(self.caches) >= _MAX_PLAN_CACHES:
                    self.caches.clear()
                cache = self.caches[ids] = {}
            self.cache = cache
        self.saving_ids = ids

    def restore(self, saving: list[Collection], saving_ids: frozenset[int],
                cache: dict[str, TensorPlan | None]) -> None:
        """Go back to a saving set and cache handed out before (a replayed cycle's), as
        `set_saving(saving)` would."""
        self.saving = saving
        self.saving_ids = self._key = saving_ids
        self.cache = cache

    def cache_for(self, saving_ids: frozenset[int]) -> dict[str, TensorPlan | None] | None:
        return self.caches.get(saving_ids)

    def plan(self, name: str) -> TensorPlan | None:
        """What to save for `name` at this step, or None. Callers check `saving` first."""
        try:
            return self.cache[name]
        except KeyError:
            pass
        plan = self.cache[name] = self.plan_for(
            name, [c for c in self.matching(name) if id(c) in self.saving_ids])
        return plan

    def plan_for(self, name: str, colls: list[Collection]) -> TensorPlan | None:
        """The plan that saving `name` in `colls` makes (they learn the name); None if empty."""
        if not colls:
            return None
        plan = TensorPlan(name, collections=colls)
        seen: set[tuple[str, bool]] = set()
        histogram_in = []
        for c in colls:
            c.add_tensor_name(name)
            self.matched.add(c.name)
            rc = c.reduction_config
            plan.save_raw |= rc.save_raw_tensor
            plan.save_shape |= rc.save_shape
            if c.name in SM_METRIC_COLLECTIONS:
                plan.sm_metric = True
            if c.name in SCALAR_COLLECTIONS:
                plan.tb_scalar = True
            elif c.save_histogram and c.name not in NON_HISTOGRAM_COLLECTIONS:
                plan.histogram = True
            if (c.save_histogram and c.name not in NON_HISTOGRAM_COLLECTIONS
                    and id(c) in self.explicit_ids):
                histogram_in.append(c.name)
            if c.name in NON_REDUCTION_COLLECTIONS:
                continue
            for pair in rc.iter_reductions():
                if pair not in seen:
                    seen.add(pair)
                    plan.reductions.append(pair)
        plan.histogram_in = tuple(histogram_in)
        return plan

    def wants(self, name: str) -> bool:
        """Would `name` be saved at this step? (No side effects, unlike `plan`.)"""
        return bool(self.saving) and any(id(c) in self.saving_ids for c in self.matching(name))


__all__ = ["CapturePlan", "TensorPlan", "matches_by_regex"]
