"""The rule-evaluator container program: ``smdebug-rule-runner``, or
``python -m smdebug_lite.rule_runner``.

SageMaker runs each ``DebugRuleConfigurations`` entry as a Processing job on the configured
``RuleEvaluatorImage``. This package is that image's entrypoint, and it also runs on a laptop
with no AWS at all (a local trial directory and a private ``--opt-ml`` root).

Exit codes (SageMaker marks the job Completed only for 0):

* 0 - NoIssuesFound
* 1 - IssuesFound (the rule's condition was met)
* 2 - Error (bad configuration, unreadable source or trial, an exception or ``sys.exit()`` in
  the rule, or no data within the trial timeout)
* 128 + signal number (143 for SIGTERM, 130 for SIGINT) - Stopped
"""

from __future__ import annotations

EXIT_NO_ISSUES = 0
EXIT_ISSUES_FOUND = 1
EXIT_ERROR = 2
EXIT_STOPPED_BASE = 128

__all__ = ["EXIT_ERROR", "EXIT_ISSUES_FOUND", "EXIT_NO_ISSUES", "EXIT_STOPPED_BASE"]
