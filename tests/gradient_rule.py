"""A custom rule written the way the published example rules are (old base-class call, plain
Trial API). One file serves both uses: the rule-runner tests upload its text as the rule source,
the notebook-pattern tests import the class."""

from __future__ import annotations

from smdebug.rules.rule import Rule


class GradientMagnitude(Rule):
    """Met when the mean absolute value of some gradient is above `threshold`."""

    def __init__(self, base_trial, threshold=10.0):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="gradients"):
            value = self.base_trial.tensor(name).reduction_value(step, "mean", abs=True)
            if value > self.threshold:
                self.logger.info("%s at step %d is %f", name, step, value)
                return True
        return False
