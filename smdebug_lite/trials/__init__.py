"""Reading saved tensors: `create_trial(path)` gives a Trial; `trial.tensor(name)` a Tensor."""

from smdebug_lite.trials.local_trial import LocalTrial
from smdebug_lite.trials.s3_trial import S3Trial
from smdebug_lite.trials.tensor import StepState, Tensor
from smdebug_lite.trials.trial import Trial
from smdebug_lite.trials.utils import create_trial

__all__ = ["LocalTrial", "S3Trial", "StepState", "Tensor", "Trial", "create_trial"]
