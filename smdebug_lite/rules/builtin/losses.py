"""Rules about the loss curve: LossNotDecreasing, Overfit, Overtraining."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from smdebug_lite.config.arguments import parse_mode
from smdebug_lite.modes import ModeKeys
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
class _Window:
    """The saved losses of one averaging window: (mode step, value), oldest first."""

    points: list[tuple[int, float]]

    @property
    def mean(self) -> float:
        return sum(v for _, v in self.points) / len(self.points)

    @property
    def last_step(self) -> int:
        return self.points[-1][0]

    def squared_steps(self) -> tuple[float, int]:
        """(sum of squared differences of successive values, number of pairs)."""
        vals = [v for _, v in self.points]
        pairs = zip(vals, vals[1:], strict=False)
        return sum((b - a) ** 2 for a, b in pairs), max(len(vals) - 1, 0)


@dataclass
class _LossTrack:
    first_step: int
    next_check: int
    history: list[tuple[int, float]] = field(default_factory=list)
    baseline: _Window | None = None  # None until the first check
    tolerated: bool = False  # the last check let a small increase pass


def _noise_se(a: _Window, b: _Window) -> float:
    """Standard error of mean(b) - mean(a), with the noise level estimated from differences
    of successive losses inside each window (half their mean square is the variance of
    independent noise, and a slow trend barely inflates it). 0 with no pairs to estimate from."""
    ss_a, n_a = a.squared_steps()
    ss_b, n_b = b.squared_steps()
    if n_a + n_b == 0:
        return 0.0
    variance = (ss_a + ss_b) / (2.0 * (n_a + n_b))
    return math.sqrt(variance * (1.0 / len(a.points) + 1.0 / len(b.points)))


class LossNotDecreasing(BuiltinRule):
    """Fires when a loss stops decreasing at an adequate rate.

    Every `num_steps` (mode) steps the mean of the losses saved in the last `window_steps`
    steps is compared with the same mean at the previous check (at the first check the steps
    seen so far are split in two halves, earlier vs later). A decrease counts only when it
    exceeds `diff_percent` percent plus `noise_tolerance` standard errors of the difference of
    the two means, so minibatch noise alone cannot pass for progress. The rule fires when the
    loss did not decrease that much, or went up by more than `increase_threshold_percent`
    percent (beyond the noise). A smaller increase is tolerated once: the next check compares
    against the same earlier window, and fires if the loss still has not decreased.

    Parameters: ``collection_names``, ``tensor_regex`` (extra scalar tensors to check),
    ``use_losses_collection`` (bool, default True), ``num_steps`` (int, 10),
    ``diff_percent`` (float, 0.1), ``increase_threshold_percent`` (float, 5), ``mode`` (TRAIN,
    EVAL or GLOBAL; default: EVAL if the losses were saved in EVAL mode, else TRAIN, else
    every step), ``window_steps`` (int, default num_steps: how many mode steps of saved losses
    each mean covers; 1 compares single losses), ``noise_tolerance`` (float, 1: standard errors
    of noise a decrease must exceed; 0 compares the means as they are). Collections:
    ``losses``.
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str | None = None, use_losses_collection: str = "True",
                 num_steps: str = "10", diff_percent: str = "0.1",
                 increase_threshold_percent: str = "5", mode: str | None = None,
                 window_steps: str | None = None, noise_tolerance: str = "1",
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
        window = parse_int(r, "window_steps", window_steps, allow_none=True, min_value=1)
        self.window_steps = self.num_steps if window is None else window
        self.noise_tolerance = parse_float(r, "noise_tolerance", noise_tolerance, min_value=0.0)
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
                        mode=self.mode.name if self.mode else None,
                        window_steps=self.window_steps, noise_tolerance=self.noise_tolerance)
        self.selection = TensorSelection(collections, regexes)
        self._tracks: dict[tuple[ModeKeys, str], _LossTrack] = {}
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
            track = self._tracks.get(key)
            if track is None:
                track = self._tracks[key] = _LossTrack(mode_step, mode_step + self.num_steps)
            track.history.append((mode_step, loss))
            if mode_step < track.next_check:
                continue
            if not math.isfinite(loss):
                return self.flag(step, f"{name} is {loss}", tensor=name, loss=loss)
            verdict = self._check(track, mode_step)
            if verdict is not None:
                reason, base, current, decrease, noise = verdict
                return self.flag(
                    step,
                    f"{name}: mean loss {current.mean:.6g} over mode steps "
                    f"{current.points[0][0]}-{current.last_step} vs {base.mean:.6g} over "
                    f"{base.points[0][0]}-{base.last_step} in mode {mode.name}: {reason}",
                    tensor=name, previous=base.mean, current=current.mean,
                    decrease_percent=decrease, noise_percent=noise)
        return False

    def _windows(self, track: _LossTrack, check: int) -> tuple[_Window, _Window]:
        """(baseline, current) windows for a check at mode step `check`."""
        hist = track.history
        if track.baseline is None:
            # First check: no losses before the first step, so the steps seen so far are
            # split into an earlier and a later half (each at most window_steps long).
            half = max(1, min(self.window_steps, (check - track.first_step + 1) // 2))
            early = [p for p in hist if p[0] < track.first_step + half]
            late = [p for p in hist if p[0] > check - half]
            return _Window(early or hist[:1]), _Window(late or hist[-1:])
        late = [p for p in hist if p[0] > check - self.window_steps]
        return track.baseline, _Window(late or hist[-1:])

    def _check(self, track: _LossTrack, check: int
               ) -> tuple[str, _Window, _Window, float, float] | None:
        """Compare the windows at a check; (reason, baseline, current, decrease %, noise %)
        when the rule fires, else None."""
        base, current = self._windows(track, check)
        track.next_check = check + self.num_steps
        # The baseline keeps its own points; the history only feeds later current windows.
        track.history = [p for p in track.history if p[0] > check - self.window_steps]
        if base.mean == 0 or not math.isfinite(base.mean):
            track.baseline, track.tolerated = current, False
            return None
        scale = abs(base.mean) / 100.0
        decrease = (base.mean - current.mean) / scale
        noise = self.noise_tolerance * _noise_se(base, current) / scale
        if decrease - noise >= self.diff_percent:
            track.baseline, track.tolerated = current, False
            return None
        track.baseline = base
        increase = -decrease
        if increase - noise > self.increase_threshold_percent:
            reason = (f"increased by {increase:.4g}%, more than "
                      f"{self.increase_threshold_percent:g}% + noise {noise:.3g}%")
            return reason, base, current, decrease, noise
        if increase > 0 and not track.tolerated:
            track.tolerated = True  # a small increase: look again one check later
            return None
        reason = (f"changed by {increase:+.4g}%, not a decrease of at least "
                  f"{self.diff_percent:g}% + noise {noise:.3g}%")
        return reason, base, current, decrease, noise


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
