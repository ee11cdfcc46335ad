"""SageMaker's DebugHookConfig JSON -> settings for a hook and its collections.

SageMaker writes the job's DebugHookConfig (PascalCase keys, string values) to
``/opt/ml/input/config/debughookconfig.json``. Parsing follows smdebug 1.0.x,
with these deliberate fixes:

* ``save_shape``/``save_raw_tensor`` count even without ``reductions``; the ReductionConfig then
  holds just those flags;
* booleans accept any case and 1/0, ``save_all`` also a list of one (``["true"]``, as
  smdebug's own TF tests passed it to the hook); ``dry_run`` is read;
* ``l1``/``l2``/``abs_l1``/``abs_l2`` are accepted as norms;
* ``default_values`` (XGBoost's save_interval=10) also apply to configured collections;
* bad values fail here, naming the file, the key and the value, instead of deep in a hook.

``S3OutputPath`` is ignored, as in smdebug (the platform uploads ``LocalPath``), but must be a
path string when present. Files are parsed within size and nesting limits
(`smdebug_lite.format.bounded_json`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from smdebug_lite.config.arguments import check_path, shown_value, unwrap_flag_list
from smdebug_lite.config.collection_manager import CollectionManager
from smdebug_lite.config.reduction_config import (
    ReductionConfig,
    describe_allowed_reductions,
    parse_bool_flag,
    parse_reductions_string,
)
from smdebug_lite.config.save_config import (
    SAVE_CONFIG_MODE_KEYS,
    SaveConfig,
    SaveConfigMode,
    parse_int,
    parse_steps,
)
from smdebug_lite.exceptions import JSONFileRejected, SMDebugValueError
from smdebug_lite.format import bounded_json
from smdebug_lite.log.logger import get_logger
from smdebug_lite.modes import ALLOWED_MODES, ModeKeys

DEFAULT_CONFIG_PATH = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_TB_CONFIG_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"
DEFAULT_OUT_DIR = "/opt/ml/output/tensors"
DEFAULT_TB_DIR = "/opt/ml/output/tensorboard"
CONFIG_FILE_PATH_ENV = "SMDEBUG_CONFIG_FILE_PATH"
TB_CONFIG_FILE_PATH_ENV = "TENSORBOARD_CONFIG_FILE_PATH"
SAGEMAKER_JOB_ENV = "TRAINING_JOB_NAME"
INCLUDE_WORKERS_VALUES = ("one", "all")

_MODE_PREFIXES = {m.name.lower(): m for m in ALLOWED_MODES}
_REDUCTION_KEYS = ("reductions", "save_raw_tensor", "save_shape")
_HOOK_KEYS = frozenset(
    SAVE_CONFIG_MODE_KEYS
    + _REDUCTION_KEYS
    + (
        "save_all",
        "include_regex",
        "include_workers",
        "export_tensorboard",
        "tensorboard_dir",
        "dry_run",
        "detect_non_finite",
    )
)
_COLLECTION_KEYS = frozenset(
    SAVE_CONFIG_MODE_KEYS + _REDUCTION_KEYS + ("include_regex", "save_histogram")
)

logger = get_logger("smdebug_lite.config.hook_json")


class HookConfigError(SMDebugValueError):
    """A DebugHookConfig that cannot be used; the message says where, what and what was expected."""

    def __init__(
        self,
        source: str,
        key: str | None = None,
        value: Any = None,
        expected: str = "",
    ) -> None:
        self.source, self.key, self.value, self.expected = source, key, value, expected
        if key is None:
            message = f"{source}: {expected}"
        else:
            message = f"{source}: {key}={shown_value(value)} is invalid: expected {expected}"
        super().__init__(message)


@dataclass
class CollectionSettings:
    """One CollectionConfigurations entry, parsed."""

    name: str
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    include_regex: list[str] = field(default_factory=list)
    save_histogram: bool = True

    def apply_to(self, collection_manager: CollectionManager) -> None:
        coll = collection_manager.get(self.name, create_if_not_exists=True)
        if self.save_config is not None:
            coll.save_config = self.save_config
        if self.reduction_config is not None:
            coll.reduction_config = self.reduction_config
        coll.include(self.include_regex)  # appended: built-ins keep their regexes
        coll.save_histogram = self.save_histogram


@dataclass
class HookSettings:
    """Everything a DebugHookConfig asks of a hook."""

    out_dir: str = DEFAULT_OUT_DIR
    save_config: SaveConfig = field(default_factory=SaveConfig)
    reduction_config: ReductionConfig | None = None
    include_regex: list[str] | None = None
    include_collections: list[str] | None = None  # None => the framework's defaults
    save_all: bool = False
    include_workers: str = "one"
    export_tensorboard: bool = False
    tensorboard_dir: str | None = None
    dry_run: bool = False
    detect_non_finite: bool = False
    collection_settings: list[CollectionSettings] = field(default_factory=list)
    source: str = "<dict>"

    def hook_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for a Hook constructor."""
        return {
            "out_dir": self.out_dir,
            "save_config": self.save_config,
            "reduction_config": self.reduction_config,
            "include_regex": self.include_regex,
            "include_collections": self.include_collections,
            "save_all": self.save_all,
            "include_workers": self.include_workers,
            "export_tensorboard": self.export_tensorboard,
            "tensorboard_dir": self.tensorboard_dir,
            "dry_run": self.dry_run,
            "detect_non_finite": self.detect_non_finite,
        }

    def apply_to(self, collection_manager: CollectionManager) -> None:
        """Create or fetch each configured collection and set what the JSON asked for."""
        for settings in self.collection_settings:
            settings.apply_to(collection_manager)


# -- paths ----------------------------------------------------------------------------------

# Configuration files are a few KB; anything this big is broken, and is not read whole.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _read_config_bytes(path: str) -> bytes:
    """The file's bytes; a file over MAX_CONFIG_BYTES is refused without being read whole."""
    with open(path, "rb") as f:
        raw = f.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise HookConfigError(
            path, expected=f"a file of at most {MAX_CONFIG_BYTES} bytes (it is larger)"
        )
    return raw


_JSON_SPECIAL = re.compile(rb'["\\\[\]{}:]')


def _too_deep_at(raw: bytes, limit: int = bounded_json.MAX_DEPTH) -> str | None:
    """The key path (``HookParameters.save_interval[][]...``) at which `raw` first nests more
    than `limit` levels, found in one pass without recursion; None if it never does."""
    labels: list[str] = []  # one per open array/object: how it is reached from its parent
    key: str | None = None
    start = -1  # of the string being read; -1 outside strings
    escaped = -1
    last = ""
    for match in _JSON_SPECIAL.finditer(raw):
        i, c = match.start(), match.group()
        if start >= 0:
            if i == escaped:
                continue
            if c == b"\\":
                escaped = i + 1
            elif c == b'"':
                last, start = raw[start + 1 : i].decode("utf-8", "replace"), -1
        elif c == b'"':
            start = i
        elif c == b":":
            key = last
        elif c in (b"[", b"{"):
            labels.append(f".{key}" if key is not None else "[]" if labels else "")
            key = None
            if len(labels) > limit:
                shown = "".join(labels[:7]).lstrip(".")
                return shown + ("..." if len(labels) > 7 else "")
        elif c in (b"]", b"}") and labels:
            labels.pop()
            key = None
    return None


def config_file_path(path: str | os.PathLike[str] | None = None) -> str:
    """The hook JSON to read: explicit path, else $SMDEBUG_CONFIG_FILE_PATH, else SageMaker's."""
    if path is not None:
        return os.fspath(path)
    return os.environ.get(CONFIG_FILE_PATH_ENV) or DEFAULT_CONFIG_PATH


def is_sagemaker_job() -> bool:
    return SAGEMAKER_JOB_ENV in os.environ


def read_local_path(path: str) -> str | None:
    """`LocalPath` of one of SageMaker's output config files (TensorBoard, checkpoints: a JSON
    object with `LocalPath` and `S3OutputPath`/`S3Uri`); None when it names none.
    HookConfigError names a file that cannot be read, is not a JSON object, or whose LocalPath
    is not a usable path."""
    try:
        raw = _read_config_bytes(path)
        if not raw.strip():
            return None
        data = bounded_json.loads(raw, path, max_bytes=MAX_CONFIG_BYTES)
    except OSError as exc:
        raise HookConfigError(path, expected=f"a readable JSON object ({exc})") from exc
    except JSONFileRejected as exc:
        raise HookConfigError(path, expected=f"a readable JSON object ({exc.reason})") from None
    if not isinstance(data, Mapping):
        raise HookConfigError(path, expected=f"a JSON object, got {type(data).__name__}")
    local = data.get("LocalPath")
    if local is None or local == "":
        return None
    return _path_value(path, "LocalPath", local)


def _path_value(source: str, key: str, value: Any) -> str:
    """A directory path or URI from a config file: a non-empty str without NUL characters."""
    try:
        return check_path(key, value)  # type: ignore[return-value]
    except SMDebugValueError:
        raise HookConfigError(
            source, key, value, "a directory path string (not empty, no NUL characters)"
        ) from None


def _tensorboard_dir_on_sagemaker() -> str | None:
    """LocalPath of the TensorBoardOutputConfig file, or None when the job has none."""
    path = os.environ.get(TB_CONFIG_FILE_PATH_ENV) or DEFAULT_TB_CONFIG_PATH
    if not os.path.isfile(path):
        return None
    return read_local_path(path) or DEFAULT_TB_DIR


# -- small parsers --------------------------------------------------------------------------


def _split(value: Any) -> list[str]:
    """smdebug's comma lists; JSON lists are accepted too."""
    if isinstance(value, str):
        return [p for p in (s.strip() for s in value.split(",")) if p]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise SMDebugValueError("a comma-separated string")


class _Ctx:
    """Where in which file we are, for error messages."""

    def __init__(self, source: str, where: str) -> None:
        self.source, self.where = source, where

    def key(self, key: str) -> str:
        return f"{self.where}.{key}"

    def fail(self, key: str, value: Any, expected: str) -> HookConfigError:
        return HookConfigError(self.source, self.key(key), value, expected)

    def bool(
        self, params: Mapping[str, Any], key: str, default: bool, list_of_one: bool = False
    ) -> bool:
        """A boolean setting; with `list_of_one`, ``["true"]`` too (`unwrap_flag_list`)."""
        value = params.get(key)
        if value is None:
            return default
        expected = "a boolean (true/false in any case, or 1/0)"
        flag = value
        if list_of_one:
            flag = unwrap_flag_list(value)
            expected += ", or a list holding one"
        try:
            return parse_bool_flag(flag, key)
        except SMDebugValueError:
            raise self.fail(key, value, expected) from None

    def regexes(self, params: Mapping[str, Any], key: str) -> list[str] | None:
        if params.get(key) is None:
            return None
        value = params[key]
        try:
            regexes = _split(value)
        except SMDebugValueError:
            raise self.fail(key, value, "comma-separated regexes") from None
        for r in regexes:
            try:
                re.compile(r)
            except re.error as exc:
                raise self.fail(key, value, f"valid regexes ({shown_value(r)}: {exc})") from None
        return regexes

    def save_value(self, key: str, field_name: str, value: Any) -> Any:
        try:
            if field_name == "save_steps":
                if isinstance(value, int) and not isinstance(value, bool):
                    value = [value]
                return parse_steps(_split(value) if isinstance(value, str) else value, key)
            return parse_int(value, key)
        except SMDebugValueError:
            what = (
                "a comma-separated list of non-negative integer steps"
                if field_name == "save_steps"
                else "an integer"
            )
            raise self.fail(key, value, what) from None

    def save_dicts(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[ModeKeys, dict]]:
        """Split save-config keys into generic ones and ``<mode>.``-prefixed ones."""
        generic: dict[str, Any] = {}
        per_mode: dict[ModeKeys, dict[str, Any]] = {m: {} for m in ALLOWED_MODES}
        for key, value in params.items():
            prefix, dot, name = key.rpartition(".")
            if dot and name in SAVE_CONFIG_MODE_KEYS:
                mode = _MODE_PREFIXES.get(prefix.strip().lower())
                if mode is None:
                    raise self.fail(
                        key,
                        value,
                        f"a mode prefix train., eval., predict. or global. before {name!r}",
                    )
                if value is not None:
                    per_mode[mode][name] = self.save_value(key, name, value)
            elif key in SAVE_CONFIG_MODE_KEYS and value is not None:
                generic[key] = self.save_value(key, key, value)
        return generic, per_mode

    def reduction_config(self, params: Mapping[str, Any]) -> ReductionConfig | None:
        if all(params.get(k) is None for k in _REDUCTION_KEYS):
            return None
        kwargs: dict[str, Any] = {}
        if params.get("reductions") is not None:
            value = params["reductions"]
            try:
                items = _split(value)
            except SMDebugValueError:
                raise self.fail("reductions", value, "a comma-separated string") from None
            for item in items:
                try:
                    parse_reductions_string([item])
                except SMDebugValueError:
                    raise self.fail(
                        "reductions",
                        value,
                        f"reduction names from: {describe_allowed_reductions()}; "
                        f"{item!r} is not one",
                    ) from None
            kwargs = parse_reductions_string(items)
        # Without reductions, flags only add to the default (raw tensors saved): asking for
        # shapes must not silently drop the values. With reductions, raw defaults to off.
        raw_default = params.get("reductions") is None
        return ReductionConfig(
            **kwargs,
            save_raw_tensor=self.bool(params, "save_raw_tensor", raw_default),
            save_shape=self.bool(params, "save_shape", False),
        )

    def mode_configs(self, merged: dict[ModeKeys, dict[str, Any]]) -> SaveConfig:
        modes: dict[ModeKeys, SaveConfigMode] = {}
        for mode, values in merged.items():
            try:
                modes[mode] = SaveConfigMode(**values)
            except SMDebugValueError as exc:
                raise HookConfigError(
                    self.source, expected=f"{self.where}: save config for {mode.name}: {exc}"
                ) from None
        return SaveConfig(modes)

    def warn_unknown(self, params: Mapping[str, Any], known: frozenset[str]) -> None:
        for key in params:
            base = key.rpartition(".")[2] if "." in key else key
            if key not in known and base not in SAVE_CONFIG_MODE_KEYS:
                logger.warning(f"{self.source}: {self.key(key)} is not a known setting; ignored")


def _mapping(source: str, where: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HookConfigError(source, where, value, "an object of string keys and values, or null")
    return value


def _defaults(source: str, default_values: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ctx = _Ctx(source, "default_values")
    for key, value in (default_values or {}).items():
        if key not in SAVE_CONFIG_MODE_KEYS:
            raise ctx.fail(key, value, f"one of the keys {', '.join(SAVE_CONFIG_MODE_KEYS)}")
        if value is not None:
            out[key] = ctx.save_value(key, key, value)
    return out


# -- entry points ---------------------------------------------------------------------------


def parse_hook_config_dict(
    d: Any, source: str = "<dict>", default_values: Mapping[str, Any] | None = None
) -> HookSettings:
    """Parse an already-loaded DebugHookConfig document."""
    if not isinstance(d, Mapping):
        raise HookConfigError(
            source, expected=f"a JSON object at the top level, got {type(d).__name__}"
        )
    defaults = _defaults(source, default_values)

    out_dir = d.get("LocalPath")
    if out_dir is None or out_dir == "":
        out_dir = DEFAULT_OUT_DIR
    else:
        out_dir = _path_value(source, "LocalPath", out_dir)
    s3_output = d.get("S3OutputPath")
    if s3_output is not None and s3_output != "":
        _path_value(source, "S3OutputPath", s3_output)  # unused, but a broken file is reported

    hook = _Ctx(source, "HookParameters")
    hook_params = _mapping(source, "HookParameters", d.get("HookParameters"))
    hook.warn_unknown(hook_params, _HOOK_KEYS)
    generic, per_mode = hook.save_dicts(hook_params)
    hook_mode_dicts = {m: {**generic, **per_mode[m]} for m in ALLOWED_MODES}
    save_config = hook.mode_configs({m: {**defaults, **v} for m, v in hook_mode_dicts.items()})

    include_workers = hook_params.get("include_workers")
    if include_workers is None:
        include_workers = "one"
    elif not isinstance(include_workers, str) or (
        include_workers.strip().lower() not in INCLUDE_WORKERS_VALUES
    ):
        raise hook.fail("include_workers", include_workers, '"one" or "all"')
    else:
        include_workers = include_workers.strip().lower()

    if is_sagemaker_job():
        # On SageMaker only the TensorBoardOutputConfig decides; HookParameters are ignored.
        tensorboard_dir = _tensorboard_dir_on_sagemaker()
        export_tensorboard = tensorboard_dir is not None
    else:
        export_tensorboard = hook.bool(hook_params, "export_tensorboard", False)
        tensorboard_dir = hook_params.get("tensorboard_dir")
        if tensorboard_dir == "":
            tensorboard_dir = None
        if tensorboard_dir is not None:
            tensorboard_dir = _path_value(source, hook.key("tensorboard_dir"), tensorboard_dir)

    settings = HookSettings(
        out_dir=out_dir,
        save_config=save_config,
        reduction_config=hook.reduction_config(hook_params),
        include_regex=hook.regexes(hook_params, "include_regex"),
        include_collections=None,
        save_all=hook.bool(hook_params, "save_all", False, list_of_one=True),
        include_workers=include_workers,
        export_tensorboard=export_tensorboard,
        tensorboard_dir=tensorboard_dir,
        dry_run=hook.bool(hook_params, "dry_run", False),
        detect_non_finite=hook.bool(hook_params, "detect_non_finite", False),
        source=source,
    )

    configs = d.get("CollectionConfigurations")
    if configs is None:
        return settings
    if not isinstance(configs, list):
        raise HookConfigError(
            source, "CollectionConfigurations", configs, "a list of collection configurations"
        )
    include: list[str] = []
    for i, entry in enumerate(configs):
        where = f"CollectionConfigurations[{i}]"
        if not isinstance(entry, Mapping):
            raise HookConfigError(
                source, where, entry, "an object with CollectionName and CollectionParameters"
            )
        name = entry.get("CollectionName")
        if not isinstance(name, str) or not name.strip():
            raise HookConfigError(
                source, f"{where}.CollectionName", name, "a non-empty collection name"
            )
        name = name.strip()
        ctx = _Ctx(source, f"{where}.CollectionParameters")
        params = _mapping(source, ctx.where, entry.get("CollectionParameters"))
        ctx.warn_unknown(params, _COLLECTION_KEYS)
        c_generic, c_per_mode = ctx.save_dicts(params)
        merged = {
            m: {**defaults, **hook_mode_dicts[m], **c_generic, **c_per_mode[m]}
            for m in ALLOWED_MODES
        }
        settings.collection_settings.append(
            CollectionSettings(
                name=name,
                save_config=ctx.mode_configs(merged),
                reduction_config=ctx.reduction_config(params),
                include_regex=ctx.regexes(params, "include_regex") or [],
                save_histogram=ctx.bool(params, "save_histogram", True),
            )
        )
        if name not in include:
            include.append(name)
    settings.include_collections = include
    return settings


def parse_hook_config(
    path: str | os.PathLike[str] | None = None, default_values: Mapping[str, Any] | None = None
) -> HookSettings:
    """Read and parse the hook JSON. A missing file raises FileNotFoundError, which callers
    take to mean "no debugging configured"; any other problem with the file, whatever its
    content, is a HookConfigError naming it, so that callers have one thing to catch."""
    resolved = config_file_path(path)
    try:
        text = _read_config_bytes(resolved).decode("utf-8-sig")
        document = bounded_json.loads(text, resolved, max_bytes=MAX_CONFIG_BYTES)
    except UnicodeDecodeError as exc:
        raise HookConfigError(resolved, expected=f"UTF-8 JSON text ({exc.reason})") from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise HookConfigError(
            resolved, expected=f"a readable file ({type(exc).__name__}: {exc.strerror or exc})"
        ) from None
    except JSONFileRejected as exc:
        deep = _too_deep_at(_read_config_bytes(resolved))
        if deep is not None:
            error = HookConfigError(
                resolved,
                expected=f"{deep or '<top level>'} nests arrays/objects more than "
                f"{bounded_json.MAX_DEPTH} levels deep; expected a DebugHookConfig document "
                "(a few levels deep)",
            )
            error.key = deep.split("[")[0].split("...")[0] or None
            raise error from None
        raise HookConfigError(resolved, expected=f"a JSON document ({exc.reason})") from None
    try:
        settings = parse_hook_config_dict(
            document, source=resolved, default_values=default_values
        )
    except HookConfigError:
        raise
    except Exception as exc:  # a shape of document no check foresaw: still the file's fault
        raise HookConfigError(
            resolved, expected=f"a DebugHookConfig document ({type(exc).__name__}: {exc})"
        ) from exc
    logger.info(f"Loaded hook configuration from {resolved}")
    return settings
