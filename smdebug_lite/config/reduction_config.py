"""What to save of a tensor: reductions, norms, the raw value and/or the shape.

The JSON form is smdebug's single comma string (``"mean,max,l2_norm,abs_min,abs_l1_norm"``), in
the order plain reductions, norms, abs reductions, abs norms. That order is also the order hooks
write reduction tensors in (``iter_reductions``).

Deliberate differences from smdebug 1.0.x, the file format unchanged:
the documented strings ``l1``/``l2``/``abs_l1``/``abs_l2`` are read as norms, and the flags accept
bool-like strings ("true", "False", "1", ...). ``median`` stays unsupported, as in smdebug.

The counts ``num_nan``, ``num_inf`` and ``num_zero`` (smdebug-lite extensions, no ``abs_`` form)
are accepted as reductions. In the JSON form they go under their own key,
``extension_reductions``, because smdebug's ReductionConfig rejects unknown names in
``reductions`` and would then fail to load the collections file of the trial.

The names themselves live in `smdebug_lite.config.reductions`; they are re-exported here, where smdebug
had them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from smdebug_lite.config.arguments import ArgumentTypeError, flag_truth, type_error
from smdebug_lite.config.reductions import ALLOWED_NORMS, ALLOWED_REDUCTIONS, COUNT_REDUCTIONS
from smdebug_lite.exceptions import SMDebugValueError

REDUCTION_CONFIG_KEYS = (
    "reductions",
    "abs_reductions",
    "norms",
    "abs_norms",
    "save_raw_tensor",
    "save_shape",
)
# The collections-file key holding the counts, apart from smdebug's keys.
EXTENSION_KEY = "extension_reductions"
_DICT_KEYS = (*REDUCTION_CONFIG_KEYS, EXTENSION_KEY)
# What the `reductions` argument accepts: smdebug's names and the counts.
_PLAIN_REDUCTIONS = ALLOWED_REDUCTIONS + COUNT_REDUCTIONS


def parse_bool_flag(value: Any, argument: str) -> bool:
    """A bool from a bool, 0/1 or a bool-like string in any case (`flag_truth`); other ints and
    anything else are errors, a wrong type an ArgumentTypeError."""
    message = f"{argument}={value!r} is not a boolean; expected true/false (any case), 1/0 or a bool"
    if isinstance(value, int) and not isinstance(value, bool) and value not in (0, 1):
        raise SMDebugValueError(message)
    truth = flag_truth(value)
    if truth is not None:
        return truth
    if isinstance(value, str):
        raise SMDebugValueError(message)
    raise ArgumentTypeError(message)


def describe_allowed_reductions() -> str:
    """The accepted items of a reductions string, for error messages."""
    names = ALLOWED_REDUCTIONS + [f"{n}_norm" for n in ALLOWED_NORMS] + list(ALLOWED_NORMS)
    return (", ".join(names) + ", each optionally prefixed with abs_; and the counts "
            + ", ".join(COUNT_REDUCTIONS))


def _unsupported_hint(name: str) -> str:
    """Why a name that looks valid is refused."""
    if name.endswith("median"):  # listed in smdebug's docs, never implemented there either
        return " (median is not supported)"
    if name.startswith("abs_") and name[len("abs_") :] in COUNT_REDUCTIONS:
        return f" (a count has no abs_ form: use {name[len('abs_'):]})"
    return ""


def _split(value: Any, argument: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in (s.strip() for s in value.split(",")) if p]
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        out = []
        for item in value:
            if not isinstance(item, str):
                raise type_error(argument, value, f"names (str); it contains {item!r}")
            if item.strip():
                out.append(item.strip())
        return out
    raise type_error(argument, value, "a list of names or a comma-separated string")


def _dedup(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _check_names(value: Any, argument: str, allowed: list[str], kind: str) -> list[str]:
    names = []
    for raw in _split(value, argument):
        name = raw.lower()
        if kind == "norm" and name.endswith("_norm"):
            name = name[: -len("_norm")]
        if name not in allowed:
            hint = _unsupported_hint(f"abs_{name}" if argument.startswith("abs_") else name)
            raise SMDebugValueError(
                f"{argument}: unknown {kind} {raw!r}{hint}; "
                f"allowed: {', '.join(allowed)}"
            )
        names.append(name)
    return _dedup(names)


def parse_reductions_string(value: str | Iterable[str], argument: str = "reductions") -> dict:
    """Split a hook-JSON ``reductions`` value into ReductionConfig keyword arguments.

    ``abs_X_norm``/``abs_lN`` are abs norms, ``abs_X`` abs reductions, ``X_norm``/``lN`` norms,
    anything else a plain reduction. Unknown items raise, naming the item as written.
    """
    out: dict[str, list[str]] = {
        "reductions": [],
        "abs_reductions": [],
        "norms": [],
        "abs_norms": [],
    }
    for raw in _split(value, argument):
        item = raw.lower()
        is_abs = item.startswith("abs_")
        base = item[len("abs_") :] if is_abs else item
        if base.endswith("_norm"):
            kind, name = "norms", base[: -len("_norm")]
            valid = name in ALLOWED_NORMS
        elif base in ALLOWED_NORMS:
            kind, name, valid = "norms", base, True
        else:
            kind, name = "reductions", base
            valid = name in (ALLOWED_REDUCTIONS if is_abs else _PLAIN_REDUCTIONS)
        if not valid:
            raise SMDebugValueError(
                f"{argument}: unknown reduction {raw!r}{_unsupported_hint(item)}; "
                f"allowed: {describe_allowed_reductions()}"
            )
        key = f"abs_{kind}" if is_abs else kind
        if name not in out[key]:
            out[key].append(name)
    return out


class ReductionConfig:
    """Reductions and norms to save instead of (or with) the raw tensor."""

    def __init__(
        self,
        reductions: Iterable[str] | str | None = None,
        abs_reductions: Iterable[str] | str | None = None,
        norms: Iterable[str] | str | None = None,
        abs_norms: Iterable[str] | str | None = None,
        save_raw_tensor: bool | str = False,
        save_shape: bool | str = False,
    ) -> None:
        self.reductions: list[str] = _check_names(
            reductions, "reductions", _PLAIN_REDUCTIONS, "reduction"
        )
        self.abs_reductions: list[str] = _check_names(
            abs_reductions, "abs_reductions", ALLOWED_REDUCTIONS, "reduction"
        )
        self.norms: list[str] = _check_names(norms, "norms", ALLOWED_NORMS, "norm")
        self.abs_norms: list[str] = _check_names(abs_norms, "abs_norms", ALLOWED_NORMS, "norm")
        self.save_raw_tensor: bool = parse_bool_flag(save_raw_tensor, "save_raw_tensor")
        self.save_shape: bool = parse_bool_flag(save_shape, "save_shape")

    def iter_reductions(self) -> list[tuple[str, bool]]:
        """(name, is_abs) pairs in write order; norms are named ``l1``/``l2``."""
        return (
            [(r, False) for r in self.reductions]
            + [(n, False) for n in self.norms]
            + [(r, True) for r in self.abs_reductions]
            + [(n, True) for n in self.abs_norms]
        )

    @property
    def has_reductions(self) -> bool:
        return bool(self.reductions or self.abs_reductions or self.norms or self.abs_norms)

    def reductions_string(self) -> str:
        parts = (
            list(self.reductions)
            + [f"{n}_norm" for n in self.norms]
            + [f"abs_{r}" for r in self.abs_reductions]
            + [f"abs_{n}_norm" for n in self.abs_norms]
        )
        return ",".join(parts)

    def to_json_dict(self) -> dict[str, Any]:
        """smdebug's form; the counts, if any, under `EXTENSION_KEY` (which smdebug ignores)."""
        counts = [r for r in self.reductions if r in COUNT_REDUCTIONS]
        if not counts:
            return {
                "save_raw_tensor": self.save_raw_tensor,
                "reductions": self.reductions_string(),
                "save_shape": self.save_shape,
            }
        smdebug_part = ReductionConfig(
            [r for r in self.reductions if r not in COUNT_REDUCTIONS],
            self.abs_reductions, self.norms, self.abs_norms,
        )
        return {
            "save_raw_tensor": self.save_raw_tensor,
            "reductions": smdebug_part.reductions_string(),
            "save_shape": self.save_shape,
            EXTENSION_KEY: ",".join(counts),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> ReductionConfig:
        """Collections-file form; ``reductions`` may be the comma string or a list of items in
        the same grammar, and the four list keys of the constructor are also accepted."""
        if isinstance(params, ReductionConfig):
            return params
        if not isinstance(params, Mapping):
            raise type_error("reduction_config", params, "a dict")
        for key, value in params.items():
            if key not in _DICT_KEYS:
                raise SMDebugValueError(
                    f"reduction_config has the unknown key {key!r} (value {value!r}); "
                    f"allowed keys: {', '.join(_DICT_KEYS)}"
                )
        kwargs = parse_reductions_string(params.get("reductions") or "")
        if params.get(EXTENSION_KEY):
            counts = parse_reductions_string(params[EXTENSION_KEY], EXTENSION_KEY)
            other = [n for key, names in counts.items() for n in names
                     if key != "reductions" or n not in COUNT_REDUCTIONS]
            if other:
                raise SMDebugValueError(
                    f"reduction_config {EXTENSION_KEY}={params[EXTENSION_KEY]!r}: {other[0]!r} "
                    f"is not a count; expected only {', '.join(COUNT_REDUCTIONS)}"
                )
            kwargs["reductions"] = _dedup(kwargs["reductions"] + counts["reductions"])
        for key in ("abs_reductions", "norms", "abs_norms"):
            if params.get(key) is not None:
                kwargs[key] = _dedup(kwargs[key] + _split(params[key], key))
        return cls(
            **kwargs,
            save_raw_tensor=_flag(params, "save_raw_tensor"),
            save_shape=_flag(params, "save_shape"),
        )

    @classmethod
    def from_json(cls, json_str: str) -> ReductionConfig:
        return cls.from_dict(json.loads(json_str))

    @classmethod
    def from_reductions_string(
        cls, value: str, save_raw_tensor: bool | str = False, save_shape: bool | str = False
    ) -> ReductionConfig:
        return cls(
            **parse_reductions_string(value), save_raw_tensor=save_raw_tensor, save_shape=save_shape
        )

    def copy(self) -> ReductionConfig:
        return ReductionConfig(
            self.reductions,
            self.abs_reductions,
            self.norms,
            self.abs_norms,
            self.save_raw_tensor,
            self.save_shape,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReductionConfig):
            return NotImplemented
        return (
            self.reductions == other.reductions
            and self.abs_reductions == other.abs_reductions
            and self.norms == other.norms
            and self.abs_norms == other.abs_norms
            and self.save_raw_tensor == other.save_raw_tensor
            and self.save_shape == other.save_shape
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ReductionConfig(reductions={self.reductions}, abs_reductions={self.abs_reductions}, "
            f"norms={self.norms}, abs_norms={self.abs_norms}, "
            f"save_raw_tensor={self.save_raw_tensor}, save_shape={self.save_shape})"
        )


def _flag(params: Mapping[str, Any], key: str) -> bool:
    value = params.get(key)
    return False if value is None else parse_bool_flag(value, key)
