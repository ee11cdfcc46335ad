"""Rules about activation layers: SaturatedActivation, DeadRelu.

Both look at units (neurons): for an activation tensor of shape (batch, features) a unit is a
feature; for (batch, channels, ...) a channel. A unit's activity is the percentage of samples
(and positions) in which it is active. A unit whose activity is below `threshold_inactivity`
percent is inactive (dead or saturated); a layer with more than `threshold_layer` percent
inactive units meets the condition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.exceptions import TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import BuiltinRule, TensorSelection
from smdebug_lite.rules.params import parse_float, parse_regex, parse_regex_list, parse_str_list


def unit_activity_percent(active: np.ndarray) -> np.ndarray:
    """Percent of samples in which each unit is active, from a boolean activation mask."""
    a = np.asarray(active)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a.reshape(1, -1)
    elif a.ndim > 2:
        a = np.moveaxis(a, 1, 0).reshape(a.shape[1], -1).T
    return 100.0 * a.mean(axis=0)


def inactive_layer_percent(active: np.ndarray, threshold_inactivity: float) -> float:
    """Percent of a layer's units active in fewer than `threshold_inactivity` % of samples."""
    activity = unit_activity_percent(active)
    if activity.size == 0:
        return 0.0
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / activity.size


class DeadRelu(BuiltinRule):
    """Fires when a ReLU layer has more than `threshold_layer` % dead units, a unit being dead
    when its output is positive in fewer than `threshold_inactivity` % of the samples.

    Parameters: ``tensor_regex`` (default ".*relu_output"), ``threshold_inactivity``
    (percent, 1.0), ``threshold_layer`` (percent, 50.0). Collections: ReLU outputs (raw),
    e.g. a ``relu_output`` collection with include_regex ".*relu_output".
    """

    def __init__(self, base_trial: Any, tensor_regex: str = ".*relu_output",
                 threshold_inactivity: str = "1.0", threshold_layer: str = "50.0",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        regexes = parse_regex_list(r, "tensor_regex", tensor_regex)
        if not regexes:
            raise ValueError(f"{r}: parameter tensor_regex={tensor_regex!r} selects nothing")
        self.threshold_inactivity = parse_float(r, "threshold_inactivity", threshold_inactivity,
                                                min_value=0.0, max_value=100.0)
        self.threshold_layer = parse_float(r, "threshold_layer", threshold_layer,
                                           min_value=0.0, max_value=100.0)
        self.set_params(tensor_regex=tensor_regex, threshold_inactivity=self.threshold_inactivity,
                        threshold_layer=self.threshold_layer)
        self.selection = TensorSelection(regexes=regexes)

    def invoke_at_step(self, step: int) -> bool:
        for name, out in self.each_at(self.selection, step, self.value):
            dead = inactive_layer_percent(out > 0, self.threshold_inactivity)
            if dead > self.threshold_layer:
                return self.flag(step, f"{dead:.4g}% of the units of {name} are dead "
                                 f"(> {self.threshold_layer:g}%)", tensor=name, dead_percent=dead)
        return False


class SaturatedActivation(BuiltinRule):
    """Fires when a tanh or sigmoid layer has more than `threshold_layer` % saturated units, a
    unit being saturated when its input lies inside the non-saturated range
    (min, max) in fewer than `threshold_inactivity` % of the samples.

    The activation kind comes from the tensor name ("tanh" or "sigmoid" in it); other names
    are ignored. Parameters: ``collection_names``, ``tensor_regex`` (default
    ".*tanh_input|.*sigmoid_input"), ``threshold_tanh_min`` (-9.4999), ``threshold_tanh_max``
    (9.4999), ``threshold_sigmoid_min`` (-23), ``threshold_sigmoid_max`` (16.99999),
    ``threshold_inactivity`` (percent, 1.0), ``threshold_layer`` (percent, 50.0).
    Collections: the activation inputs (raw).
    """

    def __init__(self, base_trial: Any, collection_names: str | None = None,
                 tensor_regex: str = ".*tanh_input|.*sigmoid_input",
                 threshold_tanh_min: str = "-9.4999", threshold_tanh_max: str = "9.4999",
                 threshold_sigmoid_min: str = "-23", threshold_sigmoid_max: str = "16.99999",
                 threshold_inactivity: str = "1.0", threshold_layer: str = "50.0",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        collections = parse_str_list(r, "collection_names", collection_names)
        regex = parse_regex(r, "tensor_regex", tensor_regex)
        self.ranges = {
            "tanh": (parse_float(r, "threshold_tanh_min", threshold_tanh_min),
                     parse_float(r, "threshold_tanh_max", threshold_tanh_max)),
            "sigmoid": (parse_float(r, "threshold_sigmoid_min", threshold_sigmoid_min),
                        parse_float(r, "threshold_sigmoid_max", threshold_sigmoid_max)),
        }
        for kind, (lo, hi) in self.ranges.items():
            if lo >= hi:
                raise ValueError(f"{r}: threshold_{kind}_min={lo} must be below "
                                 f"threshold_{kind}_max={hi}")
        self.threshold_inactivity = parse_float(r, "threshold_inactivity", threshold_inactivity,
                                                min_value=0.0, max_value=100.0)
        self.threshold_layer = parse_float(r, "threshold_layer", threshold_layer,
                                           min_value=0.0, max_value=100.0)
        self.set_params(collection_names=collections, tensor_regex=tensor_regex,
                        ranges=self.ranges, threshold_inactivity=self.threshold_inactivity,
                        threshold_layer=self.threshold_layer)
        self.selection = TensorSelection(collections, [regex] if regex else [])

    @staticmethod
    def _kind(name: str) -> str | None:
        low = name.lower()
        if "tanh" in low:
            return "tanh"
        if "sigmoid" in low:
            return "sigmoid"
        return None

    def invoke_at_step(self, step: int) -> bool:
        for name in self.selection.names_at(self.raw_base, step):
            kind = self._kind(name)
            if kind is None:
                continue
            try:
                x = self.value(name, step)
            except TensorUnavailableForStep:
                continue
            lo, hi = self.ranges[kind]
            saturated = inactive_layer_percent((x > lo) & (x < hi), self.threshold_inactivity)
            if saturated > self.threshold_layer:
                return self.flag(step, f"{saturated:.4g}% of the units of {kind} layer {name} "
                                 f"are saturated (> {self.threshold_layer:g}%)", tensor=name,
                                 saturated_percent=saturated)
        return False
