"""SageMaker starts a training image as ``docker run <image> train``: find the job's script.

The entry point comes from ``SAGEMAKER_PROGRAM`` (env) or the ``sagemaker_program``
hyperparameter, relative to ``SAGEMAKER_SUBMIT_DIRECTORY`` (env, a local directory) or
``/opt/ml/code``, the way SageMaker's framework containers resolve it. The other
hyperparameters become ``--name value`` arguments (values are JSON-decoded when they can be, as
SageMaker stores every hyperparameter as a string).
"""

from __future__ import annotations

import json
import os

DEFAULT_OPT_ML = "/opt/ml"
# Read by the launcher itself (see inline_config.py), so never passed on to the script.
HOOK_CONFIG_HYPERPARAMETER = "smdebug_hook_config"


class EntryPointError(ValueError):
    """The job does not say which script to run, or names one that is not there."""


def _opt_ml() -> str:
    return os.environ.get("SM_OPT_ML", DEFAULT_OPT_ML)


def hyperparameters() -> dict[str, str]:
    """The job's hyperparameters.json (every value as text); empty when there is none."""
    path = os.path.join(_opt_ml(), "input", "config", "hyperparameters.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except ValueError as e:
        raise EntryPointError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise EntryPointError(f"{path}: expected a JSON object of hyperparameters")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def _decode(value: str) -> str:
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value


def resolve_train_command() -> list[str]:
    """[script, args...] for a ``train`` invocation."""
    hps = hyperparameters()
    program = os.environ.get("SAGEMAKER_PROGRAM") or _decode(hps.get("sagemaker_program", ""))
    if not program:
        raise EntryPointError(
            "the container was started with 'train' but no entry point is configured: set the "
            "SAGEMAKER_PROGRAM environment variable or the sagemaker_program hyperparameter "
            "to the training script's name")
    directory = os.environ.get("SAGEMAKER_SUBMIT_DIRECTORY", "")
    if not directory or directory.startswith("s3://"):
        directory = os.path.join(_opt_ml(), "code")
    script = program if os.path.isabs(program) else os.path.join(directory, program)
    if not os.path.isfile(script):
        raise EntryPointError(f"entry point {program!r} not found (looked for {script})")
    args: list[str] = []
    for name, value in hps.items():
        if name.startswith("sagemaker_") or name == HOOK_CONFIG_HYPERPARAMETER:
            continue
        args += [f"--{name}", _decode(value)]
    return [script, *args]
