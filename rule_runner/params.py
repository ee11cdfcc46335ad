"""Where a rule job's settings come from, and which of them reach the rule's constructor.

Sources, lowest precedence first:

1. ``<opt_ml>/config/processingjobconfig.json`` (written by SageMaker Processing): its
   ``Environment`` map and its ``ProcessingInputs`` (a trial or source mounted as an input);
2. the process environment (SageMaker delivers RuleParameters as environment variables;
   ``docker run -e`` does the same locally);
3. command-line flags, for local runs.

The environment holds many unrelated variables, so only reserved names (`RESERVED`,
``other_trial_<N>``) and names the rule's constructor asks for are ever read from it. A rule
taking ``**kwargs`` additionally gets every non-reserved key given explicitly (config file
``Environment`` or ``--param``), never arbitrary environment variables.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from smdebug_lite.log.redact import redact, register_secrets

DEFAULT_OPT_ML = "/opt/ml"
OPT_ML_ENV = "SM_OPT_ML"
OUTPUT_DIR_ENV = "SM_RULE_OUTPUT_DIR"
TRIAL_TIMEOUT_ENV = "SMDEBUG_TRIAL_TIMEOUT"

RULE_TO_INVOKE = "rule_to_invoke"
SOURCE = "source_s3_uri"
BASE_TRIAL = "base_trial"
OTHER_TRIALS = "other_trials"
START_STEP = "start_step"
END_STEP = "end_step"
ACTION_JSON = "action_json"
RULE_CONFIGURATION_NAME = "rule_configuration_name"

RESERVED = frozenset(
    {RULE_TO_INVOKE, SOURCE, BASE_TRIAL, OTHER_TRIALS, START_STEP, END_STEP, ACTION_JSON,
     RULE_CONFIGURATION_NAME}
)
OTHER_TRIAL_RE = re.compile(r"^other_trial_(\d+)$")
# Upper-case spellings accepted for the configuration name (not a RuleParameter on SageMaker).
_NAME_ENV_VARS = ("RULE_CONFIGURATION_NAME", "RuleConfigurationName", RULE_CONFIGURATION_NAME)
_SOURCE_INPUT_NAMES = {SOURCE, "source", "code"}


class ConfigError(Exception):
    """A problem with the job's configuration; reported as ``ClientError: <message>``."""


def is_reserved(name: str) -> bool:
    return name in RESERVED or OTHER_TRIAL_RE.match(name) is not None


def rebase(path: str, opt_ml: Path) -> str:
    """Map ``/opt/ml/...`` onto the configured root, so tests and local runs stay private."""
    if str(opt_ml) == DEFAULT_OPT_ML:
        return path
    if path == DEFAULT_OPT_ML:
        return str(opt_ml)
    if path.startswith(DEFAULT_OPT_ML + "/"):
        return str(opt_ml / path[len(DEFAULT_OPT_ML) + 1 :])
    return path


def parse_step(name: str, value: str | None) -> int | None:
    """A non-negative step number; empty or "None" means unbounded."""
    if value is None or value.strip().lower() in {"", "none", "null"}:
        return None
    try:
        step = int(value.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}") from None
    if step < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return step


def _is_remote(uri: str) -> bool:
    return uri.startswith("s3://")


@dataclass
class JobConfigFile:
    """What the runner uses from processingjobconfig.json."""

    environment: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # reserved name -> location
    tensors_input: str | None = None  # location of an input mounted at the tensors dir
    output_dir: str | None = None

    @classmethod
    def load(cls, path: Path, opt_ml: Path) -> JobConfigFile:
        if not path.is_file():
            return cls()
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot read {path}: {e}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{path} must hold a JSON object")
        out = cls()
        env = doc.get("Environment") or {}
        if isinstance(env, dict):
            out.environment = {str(k): str(v) for k, v in env.items() if v is not None}
        tensors_dir = rebase(f"{DEFAULT_OPT_ML}/processing/input/tensors", opt_ml)
        for item in doc.get("ProcessingInputs") or []:
            s3 = (item or {}).get("S3Input") or {}
            name = str(item.get("InputName") or "")
            uri = str(s3.get("S3Uri") or "")
            local = rebase(str(s3.get("LocalPath") or ""), opt_ml) if s3.get("LocalPath") else ""
            if name in _SOURCE_INPUT_NAMES:
                out.inputs.setdefault(SOURCE, _source_location(uri, local))
                continue
            # Trials: an s3:// URI follows a live trial; a mounted copy is only a snapshot.
            where = uri if _is_remote(uri) else local
            if not where:
                continue
            if name == BASE_TRIAL or local.rstrip("/") == tensors_dir:
                out.tensors_input = where
            elif OTHER_TRIAL_RE.match(name):
                out.inputs[name] = where
        outputs = (doc.get("ProcessingOutputConfig") or {}).get("Outputs") or []
        if len(outputs) == 1:
            local = ((outputs[0] or {}).get("S3Output") or {}).get("LocalPath")
            if local:
                out.output_dir = rebase(str(local), opt_ml)
        return out


def _source_location(uri: str, local: str) -> str:
    """A source input: the downloaded file when present, else its URI."""
    if local:
        candidate = Path(local) / PurePosixPath(uri).name if uri else Path(local)
        if candidate.is_file():
            return str(candidate)
        if Path(local).is_file():
            return local
    return uri or local


@dataclass
class RunnerConfig:
    """Everything the runner needs, resolved from the three sources."""

    opt_ml: Path
    output_dir: Path
    rule_to_invoke: str | None
    source: str | None
    base_trial: str | None
    other_trials: list[str]
    start_step: int | None
    end_step: int | None
    action_json: str | None
    configuration_name: str | None
    trial_timeout: float | None
    explicit: dict[str, str]  # non-reserved keys given in the config file or with --param
    lookup: dict[str, str]  # every key -> value, for signature-driven lookups (env included)

    @property
    def tensors_dir(self) -> Path:
        return self.opt_ml / "processing" / "input" / "tensors"

    @property
    def message_file(self) -> Path:
        return self.opt_ml / "output" / "message"

    @property
    def failure_file(self) -> Path:
        return self.opt_ml / "output" / "failure"

    def rule_parameters(self, accepted: set[str], takes_var_kwargs: bool) -> dict[str, str]:
        """Values for the constructor: the names it declares, plus explicit keys for **kwargs."""
        out = {k: self.lookup[k] for k in accepted if k in self.lookup}
        if takes_var_kwargs:
            for k, v in self.explicit.items():
                out.setdefault(k, v)
        return out

    def summary(self) -> dict[str, Any]:
        """The settings worth logging (locations with any URL credentials removed)."""
        return {
            "rule_to_invoke": self.rule_to_invoke,
            "source": redact(self.source) if self.source else None,
            "base_trial": redact(self.base_trial) if self.base_trial else None,
            "other_trials": [redact(t) for t in self.other_trials],
            "start_step": self.start_step,
            "end_step": self.end_step,
            "opt_ml": str(self.opt_ml),
            "output_dir": str(self.output_dir),
        }


def build_config(
    *,
    environ: Mapping[str, str] | None = None,
    cli_params: Mapping[str, str] | None = None,
    opt_ml: str | None = None,
    output_dir: str | None = None,
    trial_timeout: float | None = None,
) -> RunnerConfig:
    """Merge config file < environment < CLI (`cli_params` holds reserved and rule keys alike)."""
    env = dict(os.environ if environ is None else environ)
    cli = {k: v for k, v in (cli_params or {}).items() if v is not None}
    root = Path(opt_ml or env.get(OPT_ML_ENV) or DEFAULT_OPT_ML)
    job = JobConfigFile.load(root / "config" / "processingjobconfig.json", root)

    lookup: dict[str, str] = {}
    lookup.update(job.environment)
    lookup.update(env)  # consulted only for reserved names and declared parameters
    lookup.update(cli)
    register_secrets(lookup)  # before anything below can quote a value in a message
    explicit = {k: v for k, v in {**job.environment, **cli}.items() if not is_reserved(k)}

    def get(name: str) -> str | None:
        value = lookup.get(name)
        return value if value not in (None, "") else None

    other: dict[int, str] = {}
    for key, value in {**job.inputs, **lookup}.items():
        m = OTHER_TRIAL_RE.match(key)
        if m and value:
            other[int(m.group(1))] = value
    other_trials = [other[i] for i in sorted(other)]
    for item in (get(OTHER_TRIALS) or "").split(","):
        if item.strip() and item.strip() not in other_trials:
            other_trials.append(item.strip())

    base = get(BASE_TRIAL) or job.tensors_input
    source = get(SOURCE) or job.inputs.get(SOURCE)
    name = cli.get(RULE_CONFIGURATION_NAME)
    if not name:
        for var in _NAME_ENV_VARS:
            name = env.get(var) or job.environment.get(var)
            if name:
                break

    timeout = trial_timeout
    if timeout is None and env.get(TRIAL_TIMEOUT_ENV):
        try:
            timeout = float(env[TRIAL_TIMEOUT_ENV])
        except ValueError:
            raise ConfigError(
                f"{TRIAL_TIMEOUT_ENV} must be a number of seconds, got {env[TRIAL_TIMEOUT_ENV]!r}"
            ) from None

    out_dir = (output_dir or env.get(OUTPUT_DIR_ENV) or job.output_dir
               or str(root / "processing" / "output" / "rule"))
    start = parse_step(START_STEP, get(START_STEP))
    end = parse_step(END_STEP, get(END_STEP))
    if start is not None and end is not None and end <= start:
        raise ConfigError(f"end_step ({end}) must be greater than start_step ({start})")
    return RunnerConfig(
        opt_ml=root,
        output_dir=Path(rebase(out_dir, root)),
        rule_to_invoke=(get(RULE_TO_INVOKE) or "").strip() or None,
        source=rebase(source.strip(), root) if source else None,
        base_trial=rebase(base.strip(), root) if base else None,
        other_trials=[rebase(t, root) for t in other_trials],
        start_step=start,
        end_step=end,
        action_json=get(ACTION_JSON),
        configuration_name=name or None,
        trial_timeout=timeout,
        explicit=explicit,
        lookup=lookup,
    )
