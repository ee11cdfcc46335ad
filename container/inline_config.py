"""The hook configuration of a job that has no DebugHookConfig file.

Jobs that cannot set SageMaker's DebugHookConfig field (plain training jobs, ``docker run``)
give the launcher the same JSON document inline: in the ``SMDEBUG_HOOK_CONFIG`` environment
variable, or in the ``smdebug_hook_config`` hyperparameter. The launcher writes it to a file and
points ``SMDEBUG_CONFIG_FILE_PATH`` at that file, so the framework hooks and any
``get_hook()`` in the script (or in processes it starts) read one and the same configuration.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from smdebug_lite.config.hook_json import CONFIG_FILE_PATH_ENV, parse_hook_config_dict
from smdebug_lite.container.sagemaker_entry import (
    HOOK_CONFIG_HYPERPARAMETER,
    EntryPointError,
    hyperparameters,
)

HOOK_CONFIG_ENV = "SMDEBUG_HOOK_CONFIG"


class InlineConfigError(ValueError):
    """An inline hook configuration that is not a usable DebugHookConfig document."""


def _document(where: str, value: Any) -> dict[str, Any]:
    """The JSON object in `value`. SageMaker stores hyperparameters as strings and the SDK's
    framework estimators JSON-encode each value once more, so text is decoded until an object
    appears (at most three times)."""
    for _ in range(3):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError as e:
            raise InlineConfigError(
                f"{where}: expected a DebugHookConfig JSON object, got text that is not JSON "
                f"({e})") from None
    if not isinstance(value, dict):
        raise InlineConfigError(
            f"{where}: expected a DebugHookConfig JSON object, got {type(value).__name__}")
    return value


def find_inline_config() -> tuple[str, dict[str, Any]] | None:
    """(where it was found, the document), or None when the job gives none. Raises
    InlineConfigError for a document that cannot be used, naming where it came from."""
    text = os.environ.get(HOOK_CONFIG_ENV, "").strip()
    if text:
        where = f"environment variable {HOOK_CONFIG_ENV}"
        document = _document(where, text)
    else:
        try:
            value = hyperparameters().get(HOOK_CONFIG_HYPERPARAMETER)
        except EntryPointError as e:
            raise InlineConfigError(str(e)) from None
        if value is None or not str(value).strip():
            return None
        where = f"hyperparameter {HOOK_CONFIG_HYPERPARAMETER}"
        document = _document(where, value)
    parse_hook_config_dict(document, source=where)  # HookConfigError names the key and value
    return where, document


def install_inline_config(document: dict[str, Any]) -> str:
    """Write `document` to a private file and export its path; returns the path."""
    directory = tempfile.mkdtemp(prefix="smdebug-hook-config-")
    path = os.path.join(directory, "debughookconfig.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)
    os.environ[CONFIG_FILE_PATH_ENV] = path
    return path


def remove_inline_config(path: str) -> None:
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


__all__ = [
    "HOOK_CONFIG_ENV",
    "HOOK_CONFIG_HYPERPARAMETER",
    "InlineConfigError",
    "find_inline_config",
    "install_inline_config",
    "remove_inline_config",
]
