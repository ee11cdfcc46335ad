"""``smdebug.core.config_validator``: whether a hook should be created for this training job.

No hook is created when ``USE_SMDEBUG`` is false (smdebug_lite's reading of it: 0/false/no/off
in any case) or when the installed framework version is not supported; in the latter case
``USE_SMDEBUG`` is set to ``False`` for the rest of the process, as smdebug did, so every later
``get_hook`` agrees.
"""

from __future__ import annotations

import os
from typing import Any

from smdebug_lite.compat.core.logger import get_logger
from smdebug_lite.compat.core.utils import FRAMEWORK, is_framework_version_supported
from smdebug_lite.hooks.singleton import USE_SMDEBUG_ENV, smdebug_enabled

logger = get_logger()

SupportedFrameworks = [FRAMEWORK.PYTORCH, FRAMEWORK.TENSORFLOW, FRAMEWORK.MXNET, FRAMEWORK.XGBOOST]
_config_validator: ConfigValidator | None = None


class ConfigValidator:
    def __init__(self, framework_type: FRAMEWORK) -> None:
        self._create_hook = smdebug_enabled()
        self._summary = ""
        self._framework_type = framework_type

    def _validate_training_environment(self) -> None:
        if (
            self._framework_type in SupportedFrameworks
            and is_framework_version_supported(self._framework_type) is False
        ):
            self._create_hook = False

    @staticmethod
    def validate_profiler_config(profiler_config_parser: Any) -> None:
        """smdebug-lite has no profiler, so there is no profiler configuration to adjust."""

    def _validate_debugger_config(self) -> None:
        """Nothing in a debugger configuration rules a hook out."""

    def validate_training_job(self) -> bool | None:
        """True when a hook may be created; None once hooks are off for this process."""
        if self._create_hook is False:
            return None
        self._validate_training_environment()
        self._validate_debugger_config()
        if self._create_hook is False:
            logger.warning(
                "the installed %s version is not supported by smdebug-lite; setting %s=False",
                self._framework_type.value, USE_SMDEBUG_ENV,
            )
            os.environ[USE_SMDEBUG_ENV] = "False"
        return self._create_hook


def get_config_validator(framework: FRAMEWORK) -> ConfigValidator:
    """The process's validator, made for the first framework that asks."""
    global _config_validator
    if _config_validator is None:
        _config_validator = ConfigValidator(framework)
    return _config_validator


def reset_config_validator() -> None:
    global _config_validator
    _config_validator = None


__all__ = [
    "ConfigValidator",
    "SupportedFrameworks",
    "get_config_validator",
    "reset_config_validator",
]
