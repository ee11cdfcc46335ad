"""Collections: named groups of tensors with their own save/reduction settings.

The JSON form is the one smdebug writes into ``collections/000000000/<worker>_collections.json``. Built-in collection names and default regexes per framework are listed here
(``builtin_collections``) in a fixed order, so collections files are reproducible (smdebug built
them from a set, which made their order vary between processes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from smdebug_lite.config.arguments import type_error
from smdebug_lite.config.reduction_config import ReductionConfig, parse_bool_flag
from smdebug_lite.config.save_config import SaveConfig, _schedules_changed
from smdebug_lite.exceptions import SMDebugValueError

COLLECTION_KEYS = (
    "name",
    "include_regex",
    "tensor_names",
    "reduction_config",
    "save_config",
    "save_histogram",
)


class CollectionKeys:
    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    # Scalars (other than losses and metrics) meant for SageMaker Metrics; mostly TensorFlow.
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    # XGBoost
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


# Summary objects, not tensors: no reductions or histograms for them.
SUMMARIES_COLLECTIONS = frozenset({CollectionKeys.TENSORFLOW_SUMMARIES})
# Saved raw only (never reduced) and shown as TensorBoard scalars.
SCALAR_COLLECTIONS = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
        CollectionKeys.SM_METRICS,
    }
)
# Also reported to SageMaker Metrics when running in a training job.
SM_METRIC_COLLECTIONS = frozenset(
    {CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS}
)
NON_REDUCTION_COLLECTIONS = SCALAR_COLLECTIONS | SUMMARIES_COLLECTIONS
NON_HISTOGRAM_COLLECTIONS = SCALAR_COLLECTIONS | SUMMARIES_COLLECTIONS
# Skipped in EVAL and PREDICT modes.
EVAL_PREDICT_SKIPPED_COLLECTIONS = frozenset(
    {CollectionKeys.GRADIENTS, CollectionKeys.OPTIMIZER_VARIABLES}
)

# Always saved, whatever include_collections says (turn off only with end_step=0).
DEFAULT_INCLUDE_COLLECTIONS: dict[str, list[str]] = {
    "pytorch": [CollectionKeys.LOSSES],
    "xgboost": [CollectionKeys.METRICS],
    "tensorflow": [CollectionKeys.METRICS, CollectionKeys.LOSSES, CollectionKeys.SM_METRICS],
}
# What has_default_hook_configuration() compares against.
DEFAULT_SAVED_COLLECTIONS = [CollectionKeys.LOSSES]

_BUILTINS: dict[str, dict[str, list[str]]] = {
    "pytorch": {
        CollectionKeys.ALL: [],
        CollectionKeys.DEFAULT: [],
        CollectionKeys.WEIGHTS: ["^(?!gradient).*weight"],
        CollectionKeys.BIASES: ["^(?!gradient).*bias"],
        CollectionKeys.GRADIENTS: ["^gradient"],
        CollectionKeys.LOSSES: ["[Ll]oss_(?!input).*output"],
    },
    "xgboost": {
        CollectionKeys.ALL: [],
        CollectionKeys.DEFAULT: [],
        CollectionKeys.HYPERPARAMETERS: ["^hyperparameters/.*$"],
        # The sloppy A-z ranges and the [^/bias] character class are smdebug's; tensor
        # membership must match what smdebug selected, so they are kept as they are.
        CollectionKeys.METRICS: ["^[a-zA-z]+-[a-zA-z0-9]+$"],
        CollectionKeys.LOSSES: ["^[a-zA-z]+-.+(?<!(auc|map))$"],
        CollectionKeys.PREDICTIONS: ["^predictions$"],
        CollectionKeys.LABELS: ["^labels$"],
        CollectionKeys.FEATURE_IMPORTANCE: ["^feature_importance/.*"],
        CollectionKeys.AVERAGE_SHAP: ["^average_shap/.*[^/bias]$"],
        CollectionKeys.FULL_SHAP: ["^full_shap/.*[^/bias]$"],
        CollectionKeys.TREES: ["^trees/.*"],
    },
    "tensorflow": {
        CollectionKeys.ALL: [],
        CollectionKeys.DEFAULT: [],
        CollectionKeys.WEIGHTS: [],
        # TF2 eager form; graph-mode hooks historically used plain "bias".
        CollectionKeys.BIASES: ["^(?!gradient).*bias"],
        CollectionKeys.GRADIENTS: [],
        CollectionKeys.LOSSES: [],
        CollectionKeys.METRICS: [],
        CollectionKeys.INPUTS: [],
        CollectionKeys.OUTPUTS: [],
        CollectionKeys.LAYERS: [],
        CollectionKeys.SM_METRICS: [],
        CollectionKeys.OPTIMIZER_VARIABLES: [],
    },
}

# smdebug-lite extension, not in smdebug: PyTorch "inputs"/"outputs" built-ins matching the names
# our PyTorch hook gives module inputs and outputs (``<module>_input_<i>``, ``<module>_output_<i>``).
# They only select tensors when included (or with save_all). Ask for them with
# ``builtin_collections("pytorch", extensions=True)``.
PYTORCH_EXTENSION_COLLECTIONS: dict[str, list[str]] = {
    CollectionKeys.INPUTS: [r".*_input_\d+$"],
    CollectionKeys.OUTPUTS: [r".*_output_\d+$"],
}

FRAMEWORKS = tuple(_BUILTINS)


def _framework(framework: str) -> str:
    name = framework.strip().lower() if isinstance(framework, str) else framework
    if name not in _BUILTINS:
        raise SMDebugValueError(
            f"framework={framework!r} is not supported; expected one of {', '.join(FRAMEWORKS)}"
        )
    return name


def builtin_collections(framework: str, extensions: bool = False) -> dict[str, list[str]]:
    """Built-in collection name -> default regexes, in creation (and export) order.

    The names and regexes are smdebug 1.0.x's. ``extensions=True`` adds, for PyTorch only, the
    smdebug-lite extension collections ``inputs`` (``.*_input_\\d+$``) and ``outputs``
    (``.*_output_\\d+$``), which smdebug never had as PyTorch built-ins; our PyTorch hook creates
    them (see PYTORCH_EXTENSION_COLLECTIONS).
    """
    name = _framework(framework)
    result = {k: list(v) for k, v in _BUILTINS[name].items()}
    if extensions and name == "pytorch":
        result.update({k: list(v) for k, v in PYTORCH_EXTENSION_COLLECTIONS.items()})
    return result


def default_include_collections(framework: str) -> list[str]:
    return list(DEFAULT_INCLUDE_COLLECTIONS[_framework(framework)])


_names_version = 0


def tensor_names_version() -> int:
    """A number that changes whenever any collection gains or loses a tensor name (through
    `add_tensor_name`, `remove_tensor_name` or assigning `tensor_names`), so that a hook rewrites
    the collections file only when there is something new to say."""
    return _names_version


def _names_changed() -> None:
    global _names_version
    _names_version += 1


def _regex_list(value: Any, argument: str = "include_regex") -> list[str]:
    if value is None or value is False:  # False: what smdebug's from_dict defaulted to
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        items = list(value)
        for item in items:
            if not isinstance(item, str):
                raise type_error(argument, value, f"regexes (str); it contains {item!r}")
        return items
    raise type_error(argument, value, "a regex string or a list of them")


def _compile(regex: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise SMDebugValueError(f"include_regex {regex!r} is not a valid regex: {exc}") from None


class Collection:
    """A named group of tensors: explicit names plus regexes, and optional own configs.

    ``save_config``/``reduction_config`` left None mean "use the hook's".
    """

    def __init__(
        self,
        name: str,
        include_regex: str | Iterable[str] | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | Mapping[str, Any] | None = None,
        save_config: Any = None,
        save_histogram: bool | str = True,
    ) -> None:
        if not isinstance(name, str):
            raise type_error("name", name, "a collection name (str)")
        if not name:
            raise SMDebugValueError(f"name={name!r}: a collection name must be a non-empty str")
        self._name = name
        self._include_regex: list[str] = []
        self._patterns: list[re.Pattern[str]] = []
        self.include_regex = include_regex  # type: ignore[assignment]
        self.tensor_names = tensor_names  # type: ignore[assignment]
        self.reduction_config = reduction_config  # type: ignore[assignment]
        self.save_config = save_config
        self.save_histogram = save_histogram  # type: ignore[assignment]

    # -- properties -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def include_regex(self) -> list[str]:
        return self._include_regex

    @include_regex.setter
    def include_regex(self, value: str | Iterable[str] | None) -> None:
        regexes = _regex_list(value)
        patterns = [_compile(r) for r in regexes]
        self._include_regex, self._patterns = list(regexes), patterns

    @property
    def tensor_names(self) -> set[str]:
        return self._tensor_names

    @tensor_names.setter
    def tensor_names(self, value: Iterable[str] | None) -> None:
        _names_changed()
        if value is None:
            self._tensor_names: set[str] = set()
            return
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
            raise type_error("tensor_names", value, "a list or set of names")
        names = set(value)
        for n in names:
            if not isinstance(n, str):
                raise type_error("tensor_names", value, f"names (str); it contains {n!r}")
        self._tensor_names = names

    @property
    def reduction_config(self) -> ReductionConfig | None:
        return self._reduction_config

    @reduction_config.setter
    def reduction_config(self, value: ReductionConfig | Mapping[str, Any] | None) -> None:
        if value is None or isinstance(value, ReductionConfig):
            self._reduction_config = value
        elif isinstance(value, Mapping):
            self._reduction_config = ReductionConfig.from_dict(value)
        else:
            raise type_error("reduction_config", value, "a ReductionConfig, a dict or None")

    @property
    def save_config(self) -> SaveConfig | None:
        return self._save_config

    @save_config.setter
    def save_config(self, value: Any) -> None:
        # None stays None (inherit the hook's); anything else is normalised to a SaveConfig.
        self._save_config = None if value is None else SaveConfig.parse(value)
        _schedules_changed()

    @property
    def save_histogram(self) -> bool:
        return self._save_histogram

    @save_histogram.setter
    def save_histogram(self, value: bool | str) -> None:
        self._save_histogram = parse_bool_flag(value, "save_histogram")

    # -- membership -------------------------------------------------------------------------

    # Parameter names (t, tname) are smdebug's, for callers passing them by keyword.
    def include(self, t: str | Iterable[str]) -> None:
        """Append regex(es); ones already present are skipped."""
        for r in _regex_list(t):
            if r not in self._include_regex:
                self._patterns.append(_compile(r))
                self._include_regex.append(r)

    def add_tensor_name(self, tname: str) -> None:
        if tname not in self._tensor_names:
            self._tensor_names.add(tname)
            _names_changed()

    def remove_tensor_name(self, tname: str) -> None:
        if tname in self._tensor_names:
            self._tensor_names.discard(tname)
            _names_changed()

    def has_tensor_name(self, tname: str) -> bool:
        return tname in self._tensor_names

    def matches(self, name: str) -> bool:
        """True for a registered name or a name any include regex finds (``re.search``)."""
        return name in self._tensor_names or any(p.search(name) for p in self._patterns)

    # -- (de)serialisation ------------------------------------------------------------------

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self._name,
            "include_regex": list(self._include_regex),
            "tensor_names": sorted(self._tensor_names),
            "reduction_config": (
                self._reduction_config.to_json_dict() if self._reduction_config else None
            ),
            "save_config": self._save_config.to_json_dict() if self._save_config else None,
            "save_histogram": self._save_histogram,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> Collection:
        """Read one entry of a collections file. Unknown keys are ignored so files from other
        smdebug versions still load; a missing include_regex is an empty list."""
        if not isinstance(params, Mapping):
            raise SMDebugValueError(f"collection={params!r} must be a dict")
        if "name" not in params:
            raise SMDebugValueError(f"collection {dict(params)!r} has no 'name'")
        rc = params.get("reduction_config")
        sc = params.get("save_config")
        histogram = params.get("save_histogram")
        return cls(
            name=params["name"],
            include_regex=params.get("include_regex"),
            tensor_names=params.get("tensor_names") or [],
            reduction_config=ReductionConfig.from_dict(rc) if rc is not None else None,
            save_config=SaveConfig.from_dict(sc) if sc is not None else None,
            save_histogram=True if histogram is None else histogram,
        )

    @classmethod
    def from_json(cls, json_str: str) -> Collection:
        return cls.from_dict(json.loads(json_str))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return (
            self.name == other.name
            and self.include_regex == other.include_regex
            and self.tensor_names == other.tensor_names
            and self.reduction_config == other.reduction_config
            and self.save_config == other.save_config
            and self.save_histogram == other.save_histogram
        )

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return (
            f"Collection(name={self._name!r}, include_regex={self._include_regex!r}, "
            f"tensor_names={sorted(self._tensor_names)!r}, "
            f"reduction_config={self._reduction_config!r}, save_config={self._save_config!r}, "
            f"save_histogram={self._save_histogram!r})"
        )
