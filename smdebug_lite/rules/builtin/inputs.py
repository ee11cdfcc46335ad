"""Rules about the model's input data: CheckInputImages, NLPSequenceRatio."""

from __future__ import annotations

from typing import Any

import numpy as np

from smdebug_lite.rules.builtin._common import BuiltinRule, TensorSelection
from smdebug_lite.rules.params import parse_float, parse_int, parse_list, parse_regex


class CheckInputImages(BuiltinRule):
    """Fires when input images are not normalized: once `threshold_samples` images were seen,
    the running mean of some colour channel differs from 0 by more than `threshold_mean`.

    Parameters: ``threshold_mean`` (0.2), ``threshold_samples`` (500), ``regex`` (the input
    tensor, default ".*hybridsequential0_input_0"), ``channel`` (axis of the colour channel,
    default 1, i.e. NCHW). Collections: the input tensor (raw), batch on axis 0.
    """

    def __init__(self, base_trial: Any, threshold_mean: str = "0.2",
                 threshold_samples: str = "500", regex: str = ".*hybridsequential0_input_0",
                 channel: str = "1", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.threshold_mean = parse_float(r, "threshold_mean", threshold_mean, min_value=0.0)
        self.threshold_samples = parse_int(r, "threshold_samples", threshold_samples,
                                           min_value=1)
        pattern = parse_regex(r, "regex", regex)
        if pattern is None:
            raise ValueError(f"{r}: parameter regex={regex!r} selects nothing")
        self.channel = parse_int(r, "channel", channel)
        self.set_params(threshold_mean=self.threshold_mean,
                        threshold_samples=self.threshold_samples, regex=regex,
                        channel=self.channel)
        self.selection = TensorSelection(regexes=[pattern])
        self.sums: np.ndarray | None = None
        self.counts = 0
        self.images = 0

    def invoke_at_step(self, step: int) -> bool:
        for _, x in self.each_at(self.selection, step, self.value):
            if x.ndim < 2 or not -x.ndim <= self.channel < x.ndim:
                continue
            per_channel = np.moveaxis(x, self.channel, -1).reshape(-1, x.shape[self.channel])
            sums = per_channel.sum(axis=0, dtype=np.float64)
            if self.sums is None or self.sums.shape != sums.shape:
                self.sums, self.counts, self.images = np.zeros_like(sums), 0, 0
            self.sums += sums
            self.counts += per_channel.shape[0]
            self.images += x.shape[0]
        if self.sums is None or self.images < self.threshold_samples:
            return False
        means = self.sums / max(self.counts, 1)
        worst = int(np.argmax(np.abs(means)))
        if abs(means[worst]) > self.threshold_mean:
            return self.flag(step, f"mean of channel {worst} over {self.images} images is "
                             f"{means[worst]:.4g} (|mean| > {self.threshold_mean:g})",
                             channel_means=means.tolist())
        return False


class NLPSequenceRatio(BuiltinRule):
    """Fires when a token takes too large a share of the input sequences of a step (e.g.
    padding): for each token value, percent of positions equal to it > its threshold.

    Parameters: ``tensor_regex`` (default ".*embedding0_input_0"), ``token_values``
    (comma-separated numbers, default "0"), ``token_thresholds_percent`` (comma-separated
    percents, one per token or a single one for all, default "50"). Collections: the input
    sequences (raw).
    """

    def __init__(self, base_trial: Any, tensor_regex: str = ".*embedding0_input_0",
                 token_values: str = "0", token_thresholds_percent: str = "50",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        pattern = parse_regex(r, "tensor_regex", tensor_regex)
        if pattern is None:
            raise ValueError(f"{r}: parameter tensor_regex={tensor_regex!r} selects nothing")
        self.token_values = parse_list(r, "token_values", token_values, float,
                                       "comma-separated numbers")
        thresholds = parse_list(r, "token_thresholds_percent", token_thresholds_percent, float,
                                "comma-separated percentages")
        if not self.token_values:
            raise ValueError(f"{r}: parameter token_values={token_values!r} is empty")
        if len(thresholds) == 1:
            thresholds = thresholds * len(self.token_values)
        if len(thresholds) != len(self.token_values):
            raise ValueError(f"{r}: token_thresholds_percent={token_thresholds_percent!r} needs "
                             f"one value per token in token_values={token_values!r}")
        self.thresholds = thresholds
        self.set_params(tensor_regex=tensor_regex, token_values=self.token_values,
                        token_thresholds_percent=self.thresholds)
        self.selection = TensorSelection(regexes=[pattern])

    def invoke_at_step(self, step: int) -> bool:
        for name, x in self.each_at(self.selection, step, self.value):
            if x.size == 0:
                continue
            for token, limit in zip(self.token_values, self.thresholds, strict=True):
                pct = 100.0 * float(np.count_nonzero(x == token)) / x.size
                if pct > limit:
                    return self.flag(step, f"token {token:g} is {pct:.4g}% of {name} "
                                     f"(> {limit:g}%)", tensor=name, token=token, percent=pct)
        return False
