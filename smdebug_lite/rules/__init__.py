"""Rules: checks evaluated on a trial step by step (``from smdebug.rules import Rule, invoke_rule``).

Built-in SageMaker Debugger rules live in `smdebug_lite.rules.builtin`.
"""

from smdebug_lite.rules.actions import Actions
from smdebug_lite.rules.invoker import RuleResult, invoke_rule
from smdebug_lite.rules.required_tensors import RequiredTensors
from smdebug_lite.rules.required_tensors_for_trial import RequiredTensorsForTrial
from smdebug_lite.rules.rule import Rule

__all__ = [
    "Actions",
    "RequiredTensors",
    "RequiredTensorsForTrial",
    "Rule",
    "RuleResult",
    "invoke_rule",
]
