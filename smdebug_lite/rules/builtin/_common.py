"""Shared plumbing of the built-in rules: tensor selection, cached reads, mode lookups."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from smdebug_lite.exceptions import SMDebugError, TensorUnavailableForStep
from smdebug_lite.modes import ModeKeys
from smdebug_lite.rules.params import check_plain
from smdebug_lite.rules.rule import Rule
from smdebug_lite.rules.trial_view import unwrap

TRAIN, EVAL, PREDICT, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL


class TensorSelection:
    """Tensors chosen by collection names and/or regexes (``re.search``), looked up per step.

    With neither given, `default_all` decides between every tensor and none.
    """

    def __init__(self, collections: Iterable[str] = (), regexes: Sequence[re.Pattern[str]] = (),
                 *, default_all: bool = False) -> None:
        self.collections = list(dict.fromkeys(collections))
        self.regexes = list(regexes)
        self.default_all = default_all
        self._members: dict[int, tuple[int, frozenset[str]]] = {}

    @property
    def empty(self) -> bool:
        return not self.collections and not self.regexes

    def _collection_members(self, trial: Any) -> frozenset[str]:
        """Names in the requested collections, recomputed when the trial learns new tensors."""
        total = len(trial.tensor_names())
        cached = self._members.get(id(trial))
        if cached is not None and cached[0] == total:
            return cached[1]
        names: set[str] = set()
        existing = trial.collections()
        for c in self.collections:
            if c in existing:
                try:
                    names.update(trial.tensor_names(collection=c))
                except (KeyError, ValueError, SMDebugError):
                    pass
        members = frozenset(names)
        self._members[id(trial)] = (total, members)
        return members

    def names_at(self, trial: Any, step: int) -> list[str]:
        trial = unwrap(trial)
        at_step = trial.tensor_names(step=step)
        if self.empty:
            return list(at_step) if self.default_all else []
        members = self._collection_members(trial) if self.collections else frozenset()
        return [n for n in at_step if n in members or any(r.search(n) for r in self.regexes)]

    def names(self, trial: Any) -> list[str]:
        """All selected names in the trial, at any step."""
        trial = unwrap(trial)
        every = trial.tensor_names()
        if self.empty:
            return list(every) if self.default_all else []
        members = self._collection_members(trial) if self.collections else frozenset()
        return [n for n in every if n in members or any(r.search(n) for r in self.regexes)]


def mode_of(trial: Any, step: int) -> tuple[ModeKeys, int]:
    """(mode, mode step) of a global step; (GLOBAL, step) when the trial does not know."""
    trial = unwrap(trial)
    try:
        mode = trial.mode(step)
        mode_step = trial.mode_step(step)
    except (KeyError, ValueError, SMDebugError):
        return GLOBAL, step
    if mode is None or mode_step is None:
        return GLOBAL, step
    return mode, int(mode_step)


def global_step_of(trial: Any, mode: ModeKeys, mode_step: int) -> int | None:
    """The global step of (mode, mode_step), or None if it was not saved."""
    if mode == GLOBAL:
        return mode_step
    try:
        g = unwrap(trial).global_step(mode, mode_step)
    except (KeyError, ValueError, TypeError, SMDebugError):
        return None
    return None if g is None else int(g)


_NOT_PARAMETERS = frozenset({"self", "base_trial", "action_str", "other_trials"})


def _checking_parameter_types(cls: type, init: Callable[..., None]) -> Callable[..., None]:
    """`init` preceded by a check of every rule parameter's type, so that an object, a dict or
    bytes passed by a Python caller is named at once (rule, parameter, value) even where the
    rule itself would only convert it with str()."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)  # (Python's own message for a wrong call)
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if name in _NOT_PARAMETERS or kind is inspect.Parameter.VAR_POSITIONAL:
                continue
            items = value.items() if kind is inspect.Parameter.VAR_KEYWORD else [(name, value)]
            for key, item in items:
                check_plain(cls.__name__, key, item)
        return init(self, *args, **kwargs)

    return checked


class BuiltinRule(Rule):
    """A Rule with cached helpers. Every built-in takes ``action_str`` (SageMaker action_json)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        # Only the built-ins: a user's subclass may take parameters of any type it likes.
        if init is not None and cls.__module__.startswith("smdebug_lite.rules.builtin"):
            cls.__init__ = _checking_parameter_types(cls, init)  # type: ignore[method-assign]

    def __init__(self, base_trial: Any, *, action_str: str | None = None,
                 other_trials: Any = None) -> None:
        super().__init__(base_trial, action_str=action_str, other_trials=other_trials)
        self.params: dict[str, Any] = {}

    def set_params(self, **params: Any) -> None:
        """Remember parsed parameters (shown in the report and in logs)."""
        self.params = params
        self.report["RuleParameters"] = ", ".join(f"{k}={v}" for k, v in params.items())

    @property
    def raw_base(self) -> Any:
        return unwrap(self.base_trial)

    def value(self, name: str, step: int, trial: Any = None) -> np.ndarray:
        """Read-only raw value (TensorUnavailableForStep when only reductions were saved)."""
        return self.cache.value(unwrap(trial) if trial is not None else self.raw_base, name, step)

    def reduction(self, name: str, step: int, reduction: str, abs: bool = False,
                  trial: Any = None) -> float:
        return self.cache.reduction(unwrap(trial) if trial is not None else self.raw_base,
                                    name, step, reduction, abs)

    def each_at(self, selection: TensorSelection, step: int, read: Callable[..., Any],
                *args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """(name, read(name, step, *args, **kwargs)) for each of the selection's tensors at
        `step`, skipping those that have nothing to read there (TensorUnavailableForStep)."""
        for name in selection.names_at(self.raw_base, step):
            try:
                got = read(name, step, *args, **kwargs)
            except TensorUnavailableForStep:
                continue
            yield name, got

    def each_reduction_at(self, selection: TensorSelection, step: int, reduction: str,
                          abs: bool = False) -> Iterator[tuple[str, float]]:
        """`each_at(selection, step, self.reduction, reduction, abs=abs)`, the reductions of
        the step's tensors computed together (`TensorCache.reductions`); an error reading one
        is raised when its turn comes, as one by one."""
        trial = self.raw_base
        names = selection.names_at(trial, step)
        for name, got in zip(names, self.cache.reductions(trial, names, step, reduction, abs),
                             strict=True):
            if isinstance(got, Exception):
                if isinstance(got, TensorUnavailableForStep):
                    continue
                raise got
            yield name, got

    def scalar(self, name: str, step: int) -> float:
        """A scalar tensor (a loss): the mean of the raw value, or the saved mean."""
        try:
            arr = self.value(name, step)
        except TensorUnavailableForStep:
            return self.reduction(name, step, "mean")
        return float(arr.mean()) if arr.size else float("nan")

    def flag(self, step: int, reason: str, **details: Any) -> bool:
        """Record why the condition was met; returns True for `return self.flag(...)`."""
        self.report["Details"] = {"step": step, "reason": reason, **details}
        self.logger.info("%s condition met at step %d: %s", self.rule_name, step, reason)
        return True


def as_class_ids(arr: np.ndarray, argmax: bool) -> np.ndarray:
    """Class indices from labels/predictions: argmax over the last axis when asked (or when the
    array clearly holds per-class scores), else the values rounded to integers."""
    a = np.asarray(arr)
    if argmax or (a.ndim >= 2 and a.shape[-1] > 1):
        a = np.argmax(a, axis=-1) if a.ndim >= 1 and a.size else a
    return np.rint(a.astype(np.float64, copy=False)).astype(np.int64).ravel()
