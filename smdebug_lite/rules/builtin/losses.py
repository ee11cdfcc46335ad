"""Rules about the loss curve: LossNotDecreasing, Overfit, Overtraining."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from smdebug_lite.modes import ModeKeys, parse_mode
from smdebug_lite.rules.builtin._common import (
    EVAL,
    GLOBAL,
    PREDICT,
    TRAIN,
    BuiltinRule,
    TensorSelection,
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


def _has_steps(trial: Any, names: list[str], mode: ModeKeys) -> bool:
    for n in names:
        try:
            if trial.tensor(n).steps(mode=mode):
                return True
        except Exception:  # an unknown mode or tensor simply has no steps
            continue
    return False


@dataclass
class _Baseline:
    value: float
    mode_step: int
    next_check: int


class LossNotDecreasing(BuiltinRule):
    """Fires when a loss stops decreasing at an adequate rate.

    Every `num_steps` (mode) steps the current loss is compared with the loss at the previous
    check. It fires when the loss went down by less than `diff_percent` percent, or went up by
    more than `increase_threshold_percent` percent. A smaller increase is treated as noise:
    it does not fire, and the next check compares against the same (lower) earlier loss, so a
    loss that keeps not improving fires one window later.

    Parameters: ``collection_names``, ``tensor_regex`` (extra scalar tensors to check),
    ``use_losses_collection`` (bool, default True), ``num_steps`` (int, 10),
    ``diff_percent`` (float, 0.1), ``increase_threshold_percent`` (float, 5), ``mode`` (TRAIN,
    EVAL or GLOBAL; default: EVAL if the losses were saved in EVAL mode, else TRAIN, else
    every step). Collections: ``losses``.
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, use_losses_collection: str = "True",
                 num_steps: str = "10", diff_percent: str = "0.1",
                 increase_threshold_percent: str = "5", mode: str | None = None,
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        collections = parse_str_list(r, "collection_names", collection_names)
        if parse_bool(r, "use_losses_collection", use_losses_collection):
            collections.append("losses")
        regexes = parse_regex_list(r, "tensor_regex", tensor_regex)
        self.num_steps = parse_int(r, "num_steps", num_steps, min_value=1)
        self.diff_percent = parse_float(r, "diff_percent", diff_percent)
        self.increase_threshold_percent = parse_float(
            r, "increase_threshold_percent", increase_threshold_percent, min_value=0.0)
        try:
            self.mode = None if is_unset(mode) else parse_mode(mode, "mode")
        except ValueError as e:
            raise ValueError(f"{r}: {e}") from None
        if not collections and not regexes:
            raise ValueError(f"{r}: no loss tensors selected: set collection_names or "
                             "tensor_regex, or use_losses_collection=True")
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        num_steps=self.num_steps, diff_percent=self.diff_percent,
                        increase_threshold_percent=self.increase_threshold_percent,
                        mode=self.mode.name if self.mode else None)
        self.selection = TensorSelection(collections, regexes)
        self._baselines: dict[tuple[ModeKeys, str], _Baseline] = {}
        self._target: tuple[Any, ModeKeys] | None = None

    def _target_mode(self) -> ModeKeys:
        """EVAL, then TRAIN, then GLOBAL; re-decided only when new modes or tensors appear."""
        if self.mode is not None:
            return self.mode
        trial = self.raw_base
        names = self.selection.names(trial)
        key = (frozenset(trial.modes()), len(names))
        if self._target is not None and (self._target[1] == EVAL or self._target[0] == key):
            return self._target[1]
        target = GLOBAL
        for m in (EVAL, TRAIN):
            if m in key[0] and _has_steps(trial, names, m):
                target = m
                break
        self._target = (key, target)
        return target

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = mode_of(self.raw_base, step)
        target = self._target_mode()
        if target != GLOBAL and mode != target:
            return False
        if target == GLOBAL:
            mode, mode_step = GLOBAL, step
        for name, loss in self.each_at(self.selection, step, self.scalar):
            key = (mode, name)
            base = self._baselines.get(key)
            if base is None:
                self._baselines[key] = _Baseline(loss, mode_step, mode_step + self.num_steps)
                continue
            if mode_step < base.next_check:
                continue
            if not math.isfinite(loss):
                return self.flag(step, f"{name} is {loss}", tensor=name, loss=loss)
            if base.value == 0 or not math.isfinite(base.value):
                self._baselines[key] = _Baseline(loss, mode_step, mode_step + self.num_steps)
                continue
            decrease = (base.value - loss) / abs(base.value) * 100.0
            if decrease < 0 and -decrease <= self.increase_threshold_percent:
                base.next_check = mode_step + self.num_steps  # tolerated bump: keep baseline
                continue
            if decrease < 0 or decrease < self.diff_percent:
                return self.flag(
                    step,
                    f"{name} changed by {-decrease:+.4g}% from {base.value:.6g} (step "
                    f"{base.mode_step}) to {loss:.6g} (step {mode_step}) in mode {mode.name}",
                    tensor=name, previous=base.value, current=loss, decrease_percent=decrease)
            self._baselines[key] = _Baseline(loss, mode_step, mode_step + self.num_steps)
        return False


@dataclass
class _Phases:
    in_eval: bool = False
    train: list[float] = field(default_factory=list)
    train_mean: float | None = None
    eval: list[float] = field(default_factory=list)
    exceeded: int = 0


class Overfit(BuiltinRule):
    """Fires when the validation loss pulls away from the training loss.

    For each EVAL step, ratio = (mean EVAL loss so far in this evaluation phase - mean TRAIN
    loss of the preceding training phase) / mean TRAIN loss. When the ratio exceeds
    `ratio_threshold` on `patience` consecutive EVAL steps, the condition is met.

    Parameters: ``tensor_regex`` (loss tensors; default: the ``losses`` collection),
    ``start_step`` (global step to start at, default 0), ``patience`` (int, 1),
    ``ratio_threshold`` (float, 0.1). Collections: ``losses`` in TRAIN and EVAL modes.
    """

    def __init__(self, base_trial: Any, tensor_regex: str | None = None, start_step: str = "0",
                 patience: str = "1", ratio_threshold: str = "0.1",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        regexes = parse_regex_list(r, "tensor_regex", tensor_regex)
        self.start_step = parse_int(r, "start_step", start_step, min_value=0)
        self.patience = parse_int(r, "patience", patience, min_value=1)
        self.ratio_threshold = parse_float(r, "ratio_threshold", ratio_threshold)
        self.set_params(tensor_regex=tensor_regex, start_step=self.start_step,
                        patience=self.patience, ratio_threshold=self.ratio_threshold)
        self.selection = (TensorSelection(regexes=regexes) if regexes
                          else TensorSelection(collections=["losses"]))
        self._state: dict[str, _Phases] = {}

    def invoke_at_step(self, step: int) -> bool:
        if step < self.start_step:
            return False
        mode, _ = mode_of(self.raw_base, step)
        if mode not in (TRAIN, EVAL):
            return False
        for name, loss in self.each_at(self.selection, step, self.scalar):
            st = self._state.setdefault(name, _Phases())
            if mode == TRAIN:
                if st.in_eval:
                    st.in_eval, st.train = False, []
                st.train.append(loss)
                continue
            if not st.in_eval:
                st.in_eval, st.eval = True, []
                st.train_mean = sum(st.train) / len(st.train) if st.train else None
            st.eval.append(loss)
            if not st.train_mean:
                continue
            eval_mean = sum(st.eval) / len(st.eval)
            ratio = (eval_mean - st.train_mean) / abs(st.train_mean)
            if ratio > self.ratio_threshold:
                st.exceeded += 1
                if st.exceeded >= self.patience:
                    return self.flag(
                        step, f"(eval - train) / train loss = {ratio:.4g} > "
                        f"{self.ratio_threshold:g} ({name}: eval {eval_mean:.6g}, train "
                        f"{st.train_mean:.6g})", tensor=name, ratio=ratio)
            else:
                st.exceeded = 0
        return False


@dataclass
class _Best:
    best: float | None = None
    since: int = 0


class Overtraining(BuiltinRule):
    """Fires when training or validation loss stops improving (early-stopping criterion).

    A loss improves when it drops more than `delta` below its best value so far. The condition
    is met when the TRAIN loss has not improved for `patience_train` consecutive TRAIN steps, or
    the EVAL loss for `patience_validation` consecutive EVAL steps. Steps saved without a mode
    count as training steps.

    Parameters: ``patience_train`` (int, 5), ``patience_validation`` (int, 10), ``delta``
    (float, 0.01, absolute). Collections: ``losses``.
    """

    def __init__(self, base_trial: Any, patience_train: str = "5",
                 patience_validation: str = "10", delta: str = "0.01",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.patience_train = parse_int(r, "patience_train", patience_train, min_value=1)
        self.patience_validation = parse_int(r, "patience_validation", patience_validation,
                                             min_value=1)
        self.delta = parse_float(r, "delta", delta, min_value=0.0)
        self.set_params(patience_train=self.patience_train,
                        patience_validation=self.patience_validation, delta=self.delta)
        self.selection = TensorSelection(collections=["losses"])
        self._state: dict[tuple[ModeKeys, str], _Best] = {}

    def invoke_at_step(self, step: int) -> bool:
        mode, _ = mode_of(self.raw_base, step)
        if mode == PREDICT:
            return False
        if mode == GLOBAL:
            mode = TRAIN
        patience = self.patience_train if mode == TRAIN else self.patience_validation
        for name, loss in self.each_at(self.selection, step, self.scalar):
            st = self._state.setdefault((mode, name), _Best())
            if st.best is None or st.best - loss > self.delta:
                st.best, st.since = loss, 0
                continue
            st.since += 1
            if st.since >= patience:
                what = "training" if mode == TRAIN else "validation"
                return self.flag(
                    step, f"{what} loss {name} has not improved by more than {self.delta:g} "
                    f"below {st.best:.6g} for {st.since} steps", tensor=name, best=st.best)
        return False
