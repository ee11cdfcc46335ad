"""Open implementations of SageMaker Debugger's built-in rules.

Every rule takes its parameters as strings (as SageMaker passes RuleParameters) with the
documented defaults, plus ``action_str`` (the ``action_json`` of built-in actions).
`get_builtin_rule(name)` resolves a ``rule_to_invoke`` value.
"""

from __future__ import annotations

from smdebug_lite.rules.builtin.activations import DeadRelu, SaturatedActivation
from smdebug_lite.rules.builtin.classification import ClassImbalance, Confusion
from smdebug_lite.rules.builtin.gradients import ExplodingTensor, VanishingGradient
from smdebug_lite.rules.builtin.inputs import CheckInputImages, NLPSequenceRatio
from smdebug_lite.rules.builtin.losses import LossNotDecreasing, Overfit, Overtraining
from smdebug_lite.rules.builtin.tensors import (
    AllZero,
    SimilarAcrossRuns,
    TensorVariance,
    UnchangedTensor,
)
from smdebug_lite.rules.builtin.training import StalledTrainingRule
from smdebug_lite.rules.builtin.weights import PoorWeightInitialization, WeightUpdateRatio
from smdebug_lite.rules.builtin.xgboost import FeatureImportanceOverweight, TreeDepth
from smdebug_lite.rules.rule import Rule

BUILTIN_RULES: dict[str, type[Rule]] = {
    cls.__name__: cls
    for cls in (
        VanishingGradient,
        ExplodingTensor,
        LossNotDecreasing,
        Overfit,
        Overtraining,
        TensorVariance,
        AllZero,
        WeightUpdateRatio,
        UnchangedTensor,
        PoorWeightInitialization,
        SaturatedActivation,
        DeadRelu,
        ClassImbalance,
        CheckInputImages,
        SimilarAcrossRuns,
        StalledTrainingRule,
        NLPSequenceRatio,
        Confusion,
        FeatureImportanceOverweight,
        TreeDepth,
    )
}


class UnknownRuleError(KeyError):
    """`rule_to_invoke` names no built-in rule."""

    def __str__(self) -> str:
        return str(self.args[0])


def get_builtin_rule(name: str) -> type[Rule]:
    """The built-in rule class called `name` (exact name first, then case-insensitively)."""
    key = (name or "").strip()
    cls = BUILTIN_RULES.get(key)
    if cls is None:
        by_lower = {k.lower(): v for k, v in BUILTIN_RULES.items()}
        cls = by_lower.get(key.lower())
    if cls is None:
        raise UnknownRuleError(
            f"{name!r} is not a built-in rule; valid names: {', '.join(sorted(BUILTIN_RULES))}")
    return cls


__all__ = ["BUILTIN_RULES", "UnknownRuleError", "get_builtin_rule", *BUILTIN_RULES]
