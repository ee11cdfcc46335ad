"""``smdebug.core.json_config``: SageMaker's DebugHookConfig JSON, in smdebug's function shapes.

The document is validated and interpreted by smdebug_lite's parser
(`smdebug_lite.config.hook_json`), so a hook built here is configured exactly as
``Hook.create_from_json_file`` configures it, and a bad value fails with the file, key and
expected form named. These functions only repackage the result as smdebug's dicts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smdebug_lite.compat.core.config_constants import (
    CONFIG_COLLECTION_CONFIG_KEY,
    CONFIG_COLLECTION_NAME_KEY,
    CONFIG_DRYRUN_KEY,
    CONFIG_FILE_PATH_ENV_STR,
    CONFIG_HOOK_PARAMS_KEY,
    CONFIG_INCLUDE_REGEX_KEY,
    CONFIG_INCLUDE_WORKERS_KEY,
    CONFIG_RDN_CFG_KEY,
    CONFIG_REDUCTION_CONFIGS_KEY,
    CONFIG_SAVE_ALL_KEY,
    CONFIG_SAVE_CONFIGS_KEY,
    DEFAULT_CONFIG_FILE_PATH,
    DEFAULT_RESOURCE_CONFIG_FILE,
    DEFAULT_SAGEMAKER_OUTDIR,
    DEFAULT_SAGEMAKER_TENSORBOARD_PATH,
    EXPORT_TENSORBOARD_KEY,
    TENSORBOARD_CONFIG_FILE_PATH_ENV_STR,
    TENSORBOARD_DIR_KEY,
)
from smdebug_lite.compat.core.logger import get_logger
from smdebug_lite.config.hook_json import (
    HookConfigError,
    HookSettings,
    config_file_path,
    parse_hook_config,
    parse_hook_config_dict,
    read_local_path,
)
from smdebug_lite.config.reduction_config import parse_bool_flag
from smdebug_lite.config.save_config import SaveConfig, parse_int, parse_steps
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.format import bounded_json
from smdebug_lite.modes import ALLOWED_MODES, ModeKeys

_SOURCE = "<DebugHookConfig dict>"


def _settings(params_dict: Mapping[str, Any]) -> HookSettings:
    return parse_hook_config_dict(params_dict, source=_SOURCE)


def get_json_config_as_dict(json_config_path: str | None) -> dict[str, Any]:
    """The DebugHookConfig document: `json_config_path`, else $SMDEBUG_CONFIG_FILE_PATH, else
    SageMaker's path. FileNotFoundError when there is none, HookConfigError if not JSON."""
    path = config_file_path(json_config_path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        params = bounded_json.loads(raw.decode("utf-8-sig"), str(path))
    except ValueError as exc:  # not UTF-8, not JSON, too large or nested too deeply
        raise HookConfigError(path, expected=f"a JSON document ({exc})") from exc
    get_logger().info(f"Creating hook from json_config at {path}.")
    return params


def get_tensorboard_dir_from_json_config() -> str | None:
    """``LocalPath`` of SageMaker's TensorBoard output config, or None without one."""
    path = os.environ.get(TENSORBOARD_CONFIG_FILE_PATH_ENV_STR, DEFAULT_SAGEMAKER_TENSORBOARD_PATH)
    if not Path(path).is_file():
        return None
    return read_local_path(path)


def parse_save_config_dict(params: Mapping[str, Any], mode: ModeKeys | None = None) -> dict:
    """The save-config keys of a flat parameter dict (``save_interval``, ``save_steps``,
    ``start_step``, ``end_step``); with a mode, its prefixed keys (``train.save_interval``)."""
    if not isinstance(params, Mapping):
        raise SMDebugValueError(f"save config parameters={params!r} must be a dict")
    if mode is None:
        prefix = ""
    elif mode in ALLOWED_MODES:
        prefix = f"{mode.name.lower()}."
    else:
        raise SMDebugValueError(f"Invalid mode={mode!r}; expected a ModeKeys or None")
    own = {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
    ret: dict[str, Any] = {}
    for key in ("save_interval", "start_step", "end_step"):
        if key in own and own[key] is not None:
            ret[key] = parse_int(own[key], prefix + key)
    if "save_steps" in own and own["save_steps"] is not None:
        ret["save_steps"] = parse_steps(own["save_steps"], prefix + "save_steps")
    return ret


def parse_save_config_modes_dict(
    params: Mapping[str, Any], base_config_modes: Mapping[ModeKeys, dict] | None = None
) -> dict[ModeKeys, dict]:
    """Mode -> save-config keys: the generic keys, overridden by the mode's prefixed ones,
    on top of `base_config_modes` (the hook's, for a collection)."""
    base = parse_save_config_dict(params)
    configs = {m: {**base, **parse_save_config_dict(params, m)} for m in ALLOWED_MODES}
    if base_config_modes:
        configs = {m: {**base_config_modes[m], **configs[m]} for m in ALLOWED_MODES}
    return configs


def collect_hook_config_params(params_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The hook-wide settings of a DebugHookConfig document, as smdebug's dict."""
    settings = _settings(params_dict)  # validates the whole document
    hook_params = params_dict.get(CONFIG_HOOK_PARAMS_KEY) or {}
    # The document's TensorBoard settings, even on SageMaker, where a hook made from the file
    # follows the job's TensorBoardOutputConfig instead (`create_hook_from_json_config`).
    export_tensorboard = hook_params.get(EXPORT_TENSORBOARD_KEY)
    tensorboard_dir = hook_params.get(TENSORBOARD_DIR_KEY) or None
    return {
        CONFIG_RDN_CFG_KEY: settings.reduction_config,
        CONFIG_REDUCTION_CONFIGS_KEY: {},
        CONFIG_SAVE_CONFIGS_KEY: {},
        CONFIG_INCLUDE_REGEX_KEY: settings.include_regex,
        "out_dir": settings.out_dir,
        "save_config_modes": parse_save_config_modes_dict(hook_params),
        CONFIG_SAVE_ALL_KEY: settings.save_all,
        CONFIG_INCLUDE_WORKERS_KEY: settings.include_workers,
        CONFIG_DRYRUN_KEY: settings.dry_run,
        EXPORT_TENSORBOARD_KEY: (
            False
            if export_tensorboard is None
            else parse_bool_flag(export_tensorboard, f"{CONFIG_HOOK_PARAMS_KEY}.export_tensorboard")
        ),
        TENSORBOARD_DIR_KEY: tensorboard_dir,
    }


def get_include_collections(params_dict: Mapping[str, Any]) -> list[str] | None:
    """The configured collection names, or None when the document configures none."""
    configs = params_dict.get(CONFIG_COLLECTION_CONFIG_KEY)
    if configs is None:
        return None
    for config in configs if isinstance(configs, list) else ():
        if isinstance(config, Mapping) and CONFIG_COLLECTION_NAME_KEY not in config:
            raise SMDebugValueError(
                f"{CONFIG_COLLECTION_CONFIG_KEY} entry {dict(config)!r} has no "
                f"'{CONFIG_COLLECTION_NAME_KEY}'"
            )
    return _settings(params_dict).include_collections


def add_collections_to_manager(
    collection_manager: Any, params_dict: Mapping[str, Any], hook_params: Mapping[str, Any]
) -> None:
    """Create (or fetch) every configured collection and apply its settings, which inherit the
    hook's save schedule. `hook_params` is accepted for smdebug's signature; the schedule is
    read from the document itself."""
    get_include_collections(params_dict)  # the missing-name error, in smdebug's words
    _settings(params_dict).apply_to(collection_manager)


def create_hook_from_json_config(
    hook_cls: type, json_config_path: str | None, default_values: Mapping[str, Any] | None = None
) -> Any:
    """A `hook_cls` hook configured by the DebugHookConfig file; `default_values` fill save
    settings the file leaves out (XGBoost's save_interval=10)."""
    settings = parse_hook_config(json_config_path, default_values=default_values)
    from_settings = getattr(hook_cls, "from_hook_settings", None)
    if callable(from_settings):
        return from_settings(settings)
    hook = hook_cls(**settings.hook_kwargs())
    settings.apply_to(hook.collection_manager)
    return hook


def get_node_id_from_resource_config() -> str | None:
    """This host's id (``current_host``) from SageMaker's resource config, or None."""
    path = Path(DEFAULT_RESOURCE_CONFIG_FILE)
    if not path.is_file():
        return None
    try:
        data = bounded_json.loads(path.read_bytes(), str(path))
    except (OSError, ValueError):
        return None
    return data.get("current_host") if isinstance(data, dict) else None


__all__ = [
    "CONFIG_FILE_PATH_ENV_STR",
    "DEFAULT_CONFIG_FILE_PATH",
    "DEFAULT_RESOURCE_CONFIG_FILE",
    "DEFAULT_SAGEMAKER_OUTDIR",
    "SaveConfig",
    "add_collections_to_manager",
    "collect_hook_config_params",
    "create_hook_from_json_config",
    "get_include_collections",
    "get_json_config_as_dict",
    "get_node_id_from_resource_config",
    "get_tensorboard_dir_from_json_config",
    "parse_save_config_dict",
    "parse_save_config_modes_dict",
]
