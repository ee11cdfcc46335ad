"""Rules about weights and their initialization: WeightUpdateRatio, PoorWeightInitialization."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.exceptions import TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import (
    GLOBAL,
    TRAIN,
    BuiltinRule,
    TensorSelection,
    global_step_of,
    mode_of,
)
from smdebug_lite.rules.params import parse_float, parse_int, parse_regex


class WeightUpdateRatio(BuiltinRule):
    """Fires when the size of a weight update relative to the weight is too large or too small.

    ratio = ||W(t) - W(t-k)||_2 / (||W(t-k)||_2 + epsilon), on TRAIN steps (or steps saved
    without a mode). With `num_steps` k is that many training steps (save with that interval);
    without it, the previous saved training step is used. It fires when ratio >
    `large_threshold` or ratio < `small_threshold`.

    Parameters: ``num_steps`` (int, default None), ``large_threshold`` (10.0),
    ``small_threshold`` (1e-8), ``epsilon`` (1e-9). Collections: ``weights`` (raw values at
    two training steps).
    """

    def __init__(self, base_trial: Any, num_steps: str | None = None,
                 large_threshold: str = "10.0", small_threshold: str = "0.00000001",
                 epsilon: str = "0.000000001", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.num_steps = parse_int(r, "num_steps", num_steps, allow_none=True, min_value=1)
        self.large_threshold = parse_float(r, "large_threshold", large_threshold)
        self.small_threshold = parse_float(r, "small_threshold", small_threshold)
        self.epsilon = parse_float(r, "epsilon", epsilon, min_value=0.0)
        self.set_params(num_steps=self.num_steps, large_threshold=self.large_threshold,
                        small_threshold=self.small_threshold, epsilon=self.epsilon)
        self.selection = TensorSelection(collections=["weights"])

    def _previous(self, name: str, step: int) -> int | None:
        mode, mode_step = mode_of(self.raw_base, step)
        if mode not in (TRAIN, GLOBAL):
            return None
        if self.num_steps is not None:
            return global_step_of(self.raw_base, mode, mode_step - self.num_steps)
        prev = [s for s in self.raw_base.tensor(name).prev_steps(mode_step, 2, mode=mode)
                if s < mode_step]
        return global_step_of(self.raw_base, mode, prev[-1]) if prev else None

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selection.names_at(self.raw_base, step):
            prev_step = self._previous(name, step)
            if prev_step is None or prev_step < 0:
                continue
            try:
                cur = self.value(name, step)
                prev = self.value(name, prev_step)
            except TensorUnavailableForStep:
                continue
            if cur.shape != prev.shape:
                continue
            delta = np.linalg.norm((cur.astype(np.float64) - prev).ravel())
            ratio = float(delta / (np.linalg.norm(prev.astype(np.float64).ravel()) + self.epsilon))
            if ratio > self.large_threshold or ratio < self.small_threshold:
                bound = "large" if ratio > self.large_threshold else "small"
                return self.flag(step, f"update/weight ratio of {name} between steps {prev_step} "
                                 f"and {step} is {ratio:.4g} (too {bound})", tensor=name,
                                 ratio=ratio, previous_step=prev_step)
        return False


class PoorWeightInitialization(BuiltinRule):
    """Fires during the first `steps` training steps when the initialization looks poor:

    1. the variances of the activation inputs (one tensor per layer, matched by
       `activation_inputs_regex`) differ by more than a factor `threshold` (max / min), i.e.
       activations do not keep a commensurate variance across layers;
    2. the spread of some gradient (95th minus 5th percentile; tensors with at least 10
       values) is below `distribution_range`, a sign of symmetric or vanishing gradients;
    3. the loss has not improved for `patience` consecutive steps.

    Parameters: ``activation_inputs_regex`` (default ".*relu_input"), ``threshold`` (10.0),
    ``distribution_range`` (0.001), ``patience`` (5), ``steps`` (10). Collections: the
    activation inputs (e.g. a ``relu_input`` collection), ``gradients``, ``losses``.
    """

    MIN_GRADIENT_SIZE = 10

    def __init__(self, base_trial: Any, activation_inputs_regex: str = ".*relu_input",
                 threshold: str = "10.0", distribution_range: str = "0.001",
                 patience: str = "5", steps: str = "10", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        regex = parse_regex(r, "activation_inputs_regex", activation_inputs_regex)
        self.threshold = parse_float(r, "threshold", threshold, min_value=1.0)
        self.distribution_range = parse_float(r, "distribution_range", distribution_range,
                                              min_value=0.0)
        self.patience = parse_int(r, "patience", patience, min_value=1)
        self.steps = parse_int(r, "steps", steps, min_value=1)
        self.set_params(activation_inputs_regex=activation_inputs_regex,
                        threshold=self.threshold, distribution_range=self.distribution_range,
                        patience=self.patience, steps=self.steps)
        self.activations = TensorSelection(regexes=[regex] if regex else [])
        self.gradients = TensorSelection(collections=["gradients"])
        self.losses = TensorSelection(collections=["losses"])
        self._best_loss: dict[str, tuple[float, int]] = {}

    def _check_variances(self, step: int) -> bool:
        variances = {}
        for name in self.activations.names_at(self.raw_base, step):
            try:
                variances[name] = self.reduction(name, step, "variance")
            except TensorUnavailableForStep:
                continue
        if len(variances) < 2:
            return False
        lo, hi = min(variances.values()), max(variances.values())
        ratio = hi / lo if lo > 0 else (np.inf if hi > 0 else 1.0)
        if ratio > self.threshold:
            return self.flag(step, f"activation input variances differ by {ratio:.4g}x "
                             f"(> {self.threshold:g}) across layers", variances=variances)
        return False

    def _check_gradients(self, step: int) -> bool:
        for name, g in self.each_at(self.gradients, step, self.value):
            if g.size < self.MIN_GRADIENT_SIZE:
                continue
            p5, p95 = np.percentile(g.astype(np.float64, copy=False), [5, 95])
            if p95 - p5 < self.distribution_range:
                return self.flag(step, f"gradient {name}: 95th - 5th percentile = "
                                 f"{p95 - p5:.3g} < {self.distribution_range:g}", tensor=name)
        return False

    def _check_loss(self, step: int, mode_step: int) -> bool:
        for name, loss in self.each_at(self.losses, step, self.scalar):
            best = self._best_loss.get(name)
            if best is None or loss < best[0]:
                self._best_loss[name] = (loss, mode_step)
            elif mode_step - best[1] >= self.patience:
                return self.flag(step, f"loss {name} has not improved on {best[0]:.6g} for "
                                 f"{mode_step - best[1]} steps", tensor=name)
        return False

    def invoke_at_step(self, step: int) -> bool:
        mode, mode_step = mode_of(self.raw_base, step)
        if mode not in (TRAIN, GLOBAL) or mode_step >= self.steps:
            return False
        return (self._check_variances(step) or self._check_gradients(step)
                or self._check_loss(step, mode_step))
