"""XGBoost rules: FeatureImportanceOverweight, TreeDepth."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from smdebug_lite.exceptions import TensorUnavailableForStep
from smdebug_lite.rules.builtin._common import BuiltinRule, TensorSelection
from smdebug_lite.rules.params import parse_float, parse_int, parse_regex


class FeatureImportanceOverweight(BuiltinRule):
    """Fires when the `nfeatures` most important features hold more than `threshold` of the
    total importance (normalized to sum to 1) at a step. Features the model never split on have
    no importance tensor, so a model using `nfeatures` features or fewer always fires.

    Parameters: ``threshold`` (0.8), ``nfeatures`` (3), ``tensor_regex``
    (".*feature_importance/weight"; one scalar tensor per feature). Collections:
    ``feature_importance``.
    """

    def __init__(self, base_trial: Any, threshold: str = "0.8", nfeatures: str = "3",
                 tensor_regex: str = ".*feature_importance/weight",
                 action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        r = self.rule_name
        self.threshold = parse_float(r, "threshold", threshold, min_value=0.0, max_value=1.0)
        self.nfeatures = parse_int(r, "nfeatures", nfeatures, min_value=1)
        pattern = parse_regex(r, "tensor_regex", tensor_regex)
        if pattern is None:
            raise ValueError(f"{r}: parameter tensor_regex={tensor_regex!r} selects nothing")
        self.set_params(threshold=self.threshold, nfeatures=self.nfeatures,
                        tensor_regex=tensor_regex)
        self.selection = TensorSelection(regexes=[pattern])

    def invoke_at_step(self, step: int) -> bool:
        importances: dict[str, float] = {}
        for name in self.selection.names_at(self.raw_base, step):
            try:
                importances[name] = float(np.sum(self.value(name, step)))
            except TensorUnavailableForStep:
                continue
        total = sum(v for v in importances.values() if v > 0)
        if total <= 0:
            return False
        top = sorted(importances.items(), key=lambda kv: kv[1], reverse=True)[:self.nfeatures]
        share = sum(v for _, v in top) / total
        if share > self.threshold:
            return self.flag(step, f"top {self.nfeatures} features hold {share:.3g} of the "
                             f"importance (> {self.threshold:g}): {[n for n, _ in top]}",
                             share=share, top=[n for n, _ in top])
        return False


def _text(values: np.ndarray) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in np.asarray(values).ravel().tolist()]


def tree_depths(tree: np.ndarray, node: np.ndarray, yes: list[str], no: list[str]
                ) -> dict[int, int]:
    """Depth (edges from root to the deepest leaf) of each tree in an XGBoost tree dump
    (the `trees/Tree`, `trees/Node`, `trees/Yes`, `trees/No` columns)."""
    children: dict[str, list[str]] = defaultdict(list)
    trees = [int(t) for t in np.asarray(tree).ravel()]
    nodes = [int(n) for n in np.asarray(node).ravel()]
    for t, n, y, m in zip(trees, nodes, yes, no, strict=False):
        for child in (y, m):
            if child and child.lower() != "nan":
                children[f"{t}-{n}"].append(child)
    depths: dict[int, int] = {}
    for t in set(trees):
        frontier, depth, seen = [f"{t}-0"], 0, set()
        while True:
            nxt = [c for n in frontier for c in children.get(n, ()) if c not in seen]
            if not nxt:
                break
            seen.update(nxt)
            frontier, depth = nxt, depth + 1
        depths[t] = depth
    return depths


class TreeDepth(BuiltinRule):
    """Fires when an XGBoost tree saved at a step is deeper than `depth` (root at depth 0).

    Parameters: ``depth`` (int, default 4). Collections: ``trees`` (tensors ``trees/Tree``,
    ``trees/Node``, ``trees/Yes``, ``trees/No``).
    """

    def __init__(self, base_trial: Any, depth: str = "4", action_str: str | None = None) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.depth = parse_int(self.rule_name, "depth", depth, min_value=0)
        self.set_params(depth=self.depth)
        self.selection = TensorSelection(collections=["trees"], regexes=[parse_regex(
            self.rule_name, "trees", r"(^|/)trees/(Tree|Node|Yes|No)$")])

    def invoke_at_step(self, step: int) -> bool:
        columns: dict[str, str] = {}
        for name in self.selection.names_at(self.raw_base, step):
            column = name.rsplit("/", 1)[-1]
            if column in ("Tree", "Node", "Yes", "No"):
                columns.setdefault(column, name)
        if len(columns) < 4:
            return False
        try:
            tree = self.value(columns["Tree"], step)
            node = self.value(columns["Node"], step)
            yes = _text(self.value(columns["Yes"], step))
            no = _text(self.value(columns["No"], step))
        except TensorUnavailableForStep:
            return False
        depths = tree_depths(tree, node, yes, no)
        if not depths:
            return False
        deepest = max(depths, key=depths.get)
        if depths[deepest] > self.depth:
            return self.flag(step, f"tree {deepest} has depth {depths[deepest]} "
                             f"(> {self.depth})", tree=deepest, depths=depths)
        return False
