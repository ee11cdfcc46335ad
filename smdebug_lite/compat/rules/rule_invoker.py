"""smdebug's module path ``smdebug.rules.rule_invoker`` (used by many examples)."""

from smdebug_lite.rules.invoker import RuleResult, invoke_rule

__all__ = ["RuleResult", "invoke_rule"]
