"""Rules about classification outputs: ClassImbalance, Confusion."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from smdebug_lite.exceptions import TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import BuiltinRule, TensorSelection, as_class_ids
from smdebug_lite.rules.params import (
    is_unset,
    parse_bool,
    parse_float,
    parse_int,
    parse_regex,
)


def _pairs(labels: list[str], predictions: list[str]) -> list[tuple[str, str | None]]:
    """Match label tensors with prediction tensors in name order (labels_0 with predictions_0)."""
    labels = sorted(n for n in labels if n not in set(predictions))
    predictions = sorted(predictions)
    return [(lab, predictions[i] if i < len(predictions) else None)
            for i, lab in enumerate(labels)]


class ClassImbalance(BuiltinRule):
    """Fires when the classes in the labels are too imbalanced, or a class is mispredicted too
    often.

    Counts accumulate over all evaluated steps; nothing is judged before `samples` labels were
    seen. Then the condition is met when (largest class count / smallest class count) >
    `threshold_imbalance`, or when some class has a misprediction rate (1 - correct / count)
    above `threshold_misprediction`.

    Parameters: ``threshold_imbalance`` (10), ``threshold_misprediction`` (0.7), ``samples``
    (500), ``argmax`` (False: predictions are class ids; True: per-class scores, argmax over
    the last axis), ``labels_regex`` (".*labels"), ``predictions_regex`` (".*predictions").
    Collections: tensors matching the two regexes (raw).
    """

    def __init__(self, base_trial: Any, threshold_imbalance: str = "10",
                 threshold_misprediction: str = "0.7", samples: str = "500",
                 argmax: str = "False", labels_regex: str = ".*labels",
                 predictions_regex: str = ".*predictions", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.threshold_imbalance = parse_float(r, "threshold_imbalance", threshold_imbalance,
                                               min_value=1.0)
        self.threshold_misprediction = parse_float(r, "threshold_misprediction",
                                                   threshold_misprediction, min_value=0.0,
                                                   max_value=1.0)
        self.samples = parse_int(r, "samples", samples, min_value=1)
        self.argmax = parse_bool(r, "argmax", argmax)
        labels_re = parse_regex(r, "labels_regex", labels_regex)
        predictions_re = parse_regex(r, "predictions_regex", predictions_regex)
        if labels_re is None:
            raise ValueError(f"{r}: parameter labels_regex={labels_regex!r} selects nothing")
        self.set_params(threshold_imbalance=self.threshold_imbalance,
                        threshold_misprediction=self.threshold_misprediction,
                        samples=self.samples, argmax=self.argmax, labels_regex=labels_regex,
                        predictions_regex=predictions_regex)
        self.labels = TensorSelection(regexes=[labels_re])
        self.predictions = TensorSelection(regexes=[predictions_re] if predictions_re else [])
        self.counts: Counter[int] = Counter()
        self.correct: Counter[int] = Counter()
        self.total = 0
        self._with_predictions = False

    def _accumulate(self, step: int) -> None:
        trial = self.raw_base
        for lab_name, pred_name in _pairs(self.labels.names_at(trial, step),
                                          self.predictions.names_at(trial, step)):
            try:
                labels = as_class_ids(self.value(lab_name, step), argmax=False)
            except TensorUnavailableForStep:
                continue
            preds = None
            if pred_name is not None:
                try:
                    preds = as_class_ids(self.value(pred_name, step), argmax=self.argmax)
                except TensorUnavailableForStep:
                    preds = None
            if preds is not None and preds.size != labels.size:
                self.logger.warning("%s: %s has %d values but %s has %d; predictions ignored",
                                    self.rule_name, pred_name, preds.size, lab_name, labels.size)
                preds = None
            self.counts.update(labels.tolist())
            self.total += labels.size
            if preds is not None:
                self.correct.update(labels[labels == preds].tolist())
                self._with_predictions = True

    def invoke_at_step(self, step: int) -> bool:
        self._accumulate(step)
        if self.total < self.samples or not self.counts:
            return False
        largest = max(self.counts.values())
        smallest = min(self.counts.values())
        if largest / smallest > self.threshold_imbalance:
            return self.flag(step, f"class imbalance {largest}/{smallest} = "
                             f"{largest / smallest:.4g} > {self.threshold_imbalance:g}",
                             counts=dict(self.counts))
        if self._with_predictions:
            for cls, n in sorted(self.counts.items()):
                wrong = 1.0 - self.correct[cls] / n
                if wrong > self.threshold_misprediction:
                    return self.flag(step, f"class {cls} is mispredicted {wrong:.1%} of the time "
                                     f"(> {self.threshold_misprediction:g})", class_id=cls,
                                     misprediction=wrong)
        return False


class Confusion(BuiltinRule):
    """Fires when the confusion matrix of a step is poor.

    For each step, the (label, prediction) pairs fill a category_no x category_no matrix
    ``M[label][prediction]``. For every predicted class j that occurs, ``M[j][j] / sum_i M[i][j]``
    must be >= `min_diag` and every ``M[i][j] / sum_i M[i][j]`` (i != j) <= `max_off_diag`.

    Parameters: ``category_no`` (default: inferred from the data), ``labels`` / ``predictions``
    (tensor names, default "labels" / "predictions"), ``labels_collection`` /
    ``predictions_collection`` (default "labels" / "predictions"; their tensors are used when
    the named tensors are absent), ``min_diag`` (0.9), ``max_off_diag`` (0.1). Predictions with
    a class axis (last axis > 1) are reduced with argmax.
    Collections: ``labels`` and ``predictions`` (raw), saved at the same steps.
    """

    def __init__(self, base_trial: Any, category_no: str | None = None,
                 labels: str = "labels", predictions: str = "predictions",
                 labels_collection: str = "labels", predictions_collection: str = "predictions",
                 min_diag: str = "0.9", max_off_diag: str = "0.1",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.category_no = parse_int(r, "category_no", category_no, allow_none=True, min_value=1)
        self.min_diag = parse_float(r, "min_diag", min_diag, min_value=0.0, max_value=1.0)
        self.max_off_diag = parse_float(r, "max_off_diag", max_off_diag, min_value=0.0,
                                        max_value=1.0)
        self.labels_name = None if is_unset(labels) else str(labels)
        self.predictions_name = None if is_unset(predictions) else str(predictions)
        self.labels_sel = TensorSelection(
            collections=[] if is_unset(labels_collection) else [str(labels_collection)])
        self.predictions_sel = TensorSelection(
            collections=[] if is_unset(predictions_collection) else [str(predictions_collection)])
        self.set_params(category_no=self.category_no, labels=self.labels_name,
                        predictions=self.predictions_name, labels_collection=labels_collection,
                        predictions_collection=predictions_collection, min_diag=self.min_diag,
                        max_off_diag=self.max_off_diag)

    def _names(self, step: int, name: str | None, sel: TensorSelection) -> list[str]:
        at_step = self.raw_base.tensor_names(step=step)
        if name is not None and name in at_step:
            return [name]
        return sel.names_at(self.raw_base, step)

    def matrix(self, labels: np.ndarray, preds: np.ndarray) -> np.ndarray:
        n = self.category_no or int(max(labels.max(initial=0), preds.max(initial=0))) + 1
        keep = (labels >= 0) & (labels < n) & (preds >= 0) & (preds < n)
        m = np.zeros((n, n), dtype=np.int64)
        np.add.at(m, (labels[keep], preds[keep]), 1)
        return m

    def invoke_at_step(self, step: int) -> bool:
        for lab_name, pred_name in _pairs(self._names(step, self.labels_name, self.labels_sel),
                                          self._names(step, self.predictions_name,
                                                      self.predictions_sel)):
            if pred_name is None:
                continue
            try:
                labels = as_class_ids(self.value(lab_name, step), argmax=False)
                preds = as_class_ids(self.value(pred_name, step), argmax=False)
            except TensorUnavailableForStep:
                continue
            if labels.size != preds.size or labels.size == 0:
                continue
            m = self.matrix(labels, preds)
            col = m.sum(axis=0)
            for j in np.flatnonzero(col):
                diag = m[j, j] / col[j]
                if diag < self.min_diag:
                    return self.flag(step, f"predicted class {j}: only {diag:.3g} correct "
                                     f"(< {self.min_diag:g})", matrix=m.tolist())
                off = np.delete(m[:, j], j) / col[j]
                if off.size and off.max() > self.max_off_diag:
                    return self.flag(step, f"predicted class {j}: {off.max():.3g} of it from one "
                                     f"other class (> {self.max_off_diag:g})", matrix=m.tolist())
        return False
