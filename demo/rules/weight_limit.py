"""A custom rule for the demo, written like the AWS example rules (unchanged smdebug API).

It uses only ``smdebug.rules.rule.Rule`` and the Trial API, so the same file runs on the AWS
rule evaluator and on smdebug-lite's.
"""

from smdebug.rules.rule import Rule


class WeightLimit(Rule):
    """Met when some saved weight has an entry whose absolute value exceeds `limit`."""

    def __init__(self, base_trial, limit="1.0"):
        super().__init__(base_trial)
        self.limit = float(limit)  # RuleParameters always arrive as strings

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="weights"):
            largest = self.base_trial.tensor(name).reduction_value(step, "max", abs=True)
            if largest > self.limit:
                self.logger.info("%s at step %d: max |w| = %.4f > %.4f", name, step, largest,
                                 self.limit)
                return True
        return False
