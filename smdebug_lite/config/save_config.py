"""When to save: per-mode step schedules, with smdebug's semantics and collections-file JSON form.

Rules (as in smdebug 1.0.x):

* a step is saved if it is listed in ``save_steps`` OR (``start_step <= step < end_step`` and
  ``step % save_interval == 0``); ``save_steps`` therefore adds steps, it never replaces the
  interval rule, and it is not limited by start/end;
* ``end_step`` is exclusive and ``end_step=0`` turns the interval rule off;
* ``start_step`` does not shift the modulo (start 150, interval 100 saves 200, 300, ...).
"""

from __future__ import annotations

import json
import operator
import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from smdebug_lite.config.arguments import parse_mode, type_error
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.modes import ALLOWED_MODE_NAMES, ALLOWED_MODES, ModeKeys

DEFAULT_SAVE_INTERVAL = 500
DEFAULT_START_STEP = 0
DEFAULT_END_STEP: int | None = None
SAVE_CONFIG_MODE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")


def parse_int(value: Any, argument: str) -> int:
    """Integer from an int, a numpy integer, a whole float or a decimal string (hook JSON
    carries strings).

    bools and fractional floats are refused: ``True`` or ``1.5`` as a step is a mistake, not a
    number (smdebug truncated 1.5 to 1). Other types raise ArgumentTypeError.
    """
    if isinstance(value, bool):
        raise type_error(argument, value, "an integer, not a bool")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            raise SMDebugValueError(f"{argument}={value!r} must be an integer") from None
    if isinstance(value, float):
        if not value.is_integer():
            raise SMDebugValueError(f"{argument}={value!r} must be a whole number")
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise type_error(argument, value, "an integer") from None


def parse_steps(value: Any, argument: str = "save_steps") -> list[int]:
    """A list of non-negative step numbers from a list/tuple/set/range or a comma string."""
    if value is None:
        return []
    if isinstance(value, str):
        items: Iterable[Any] = [p for p in (s.strip() for s in value.split(",")) if p]
    elif isinstance(value, (list, tuple, set, frozenset, range)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
    else:
        raise type_error(argument, value, "a list of integers (or a comma-separated string)")
    steps: list[int] = []
    for item in items:
        try:
            step = parse_int(item, argument)
        except SMDebugValueError as exc:
            raise type(exc)(
                f"{argument}={value!r} contains {item!r}, which is not an integer step"
            ) from None
        if step < 0:
            raise SMDebugValueError(f"{argument}={value!r} contains the negative step {step}")
        steps.append(step)
    return steps


class ScheduleChanges:
    """Tells the objects that keep decisions derived from save schedules (each hook's step
    cursor keeps "nothing saves before step N" between steps) that a schedule changed, so that
    they recheck only then. Assigning an attribute of a SaveConfigMode, a mode of a SaveConfig
    or a collection's save_config counts as a change, and so does editing a ``save_steps``
    list in place. Watchers are held weakly and told through their `schedules_changed()`."""

    def __init__(self) -> None:
        self.count = 0
        self._watchers: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()

    def watch(self, watcher: Any) -> None:
        with self._lock:
            self._watchers.add(watcher)

    def changed(self) -> None:
        with self._lock:
            self.count += 1
            watchers = tuple(self._watchers)
        for watcher in watchers:
            watcher.schedules_changed()


    def after_fork(self) -> None:
        """A forked child must not inherit the lock held by a thread that does not exist there."""
        self._lock = threading.Lock()


_CHANGES = ScheduleChanges()
watch_schedules = _CHANGES.watch
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_CHANGES.after_fork)


def schedule_generation() -> int:
    """A number that changes whenever any save schedule changes (see `ScheduleChanges`)."""
    return _CHANGES.count


def _schedules_changed() -> None:
    _CHANGES.changed()


def _bumping(name: str):
    method = getattr(list, name)

    def changed(self, *args):
        result = method(self, *args)
        _schedules_changed()
        return result

    changed.__name__ = name
    return changed


class StepList(list):
    """A ``save_steps`` list: editing it in place (``cfg.save_steps.append(7)``) counts as a
    schedule change, as assigning a new list does."""

    __slots__ = ()

    def __reduce__(self):
        return (StepList, (list(self),))


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(StepList, _name, _bumping(_name))
del _name


class SaveConfigMode:
    """The save schedule of one mode. Attributes are plain, as in smdebug."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "save_steps" and isinstance(value, list) and not isinstance(value, StepList):
            value = StepList(value)
        object.__setattr__(self, name, value)
        _schedules_changed()

    def __init__(
        self,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int | str] | str | None = None,
    ) -> None:
        interval = (
            DEFAULT_SAVE_INTERVAL
            if save_interval is None
            else parse_int(save_interval, "save_interval")
        )
        if interval <= 0:
            raise SMDebugValueError(f"save_interval={save_interval!r} must be a positive integer")
        start = DEFAULT_START_STEP if start_step is None else parse_int(start_step, "start_step")
        if start < 0:
            raise SMDebugValueError(f"start_step={start_step!r} must not be negative")
        end = None if end_step is None else parse_int(end_step, "end_step")
        if end is not None:
            if end < 0:
                raise SMDebugValueError(f"end_step={end_step!r} must not be negative")
            if start > end:
                raise SMDebugValueError(
                    f"start_step={start} must not be greater than end_step={end}"
                )
        self.save_interval: int = interval
        self.start_step: int = start
        self.end_step: int | None = end
        self.save_steps: list[int] = StepList(parse_steps(save_steps))

    def should_save_step(self, step_num: int) -> bool:
        if self.save_steps and step_num in self.save_steps:
            return True
        if step_num < self.start_step:
            return False
        if self.end_step is not None and step_num >= self.end_step:
            return False
        return step_num % self.save_interval == 0

    def next_save_step(self, step: int) -> int | None:
        """The first step >= `step` that this schedule saves (None: none ever will)."""
        listed = [s for s in self.save_steps if s >= step]
        best = min(listed) if listed else None
        first = max(step, self.start_step)
        periodic = -(-first // self.save_interval) * self.save_interval
        if self.end_step is None or periodic < self.end_step:
            best = periodic if best is None else min(best, periodic)
        return best

    def to_json_dict(self) -> dict[str, Any]:
        # Key order is the one smdebug writes in collections files.
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(
        cls, params: Mapping[str, Any], default_values: Mapping[str, Any] | None = None
    ) -> SaveConfigMode:
        """Build from JSON-like keys; ``default_values`` fills keys that ``params`` lacks."""
        merged: dict[str, Any] = {}
        for label, source in (("default_values", default_values), ("save config", params)):
            if source is None:
                continue
            if not isinstance(source, Mapping):
                raise type_error(label, source, "a dict")
            for key, value in source.items():
                if key not in SAVE_CONFIG_MODE_KEYS:
                    raise SMDebugValueError(
                        f"{label} has the unknown key {key!r} (value {value!r}); "
                        f"allowed keys: {', '.join(SAVE_CONFIG_MODE_KEYS)}"
                    )
                merged[key] = value
        return cls(**merged)

    def copy(self) -> SaveConfigMode:
        return SaveConfigMode(self.save_interval, self.start_step, self.end_step, self.save_steps)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfigMode):
            return NotImplemented
        return (
            self.save_interval == other.save_interval
            and self.start_step == other.start_step
            and self.end_step == other.end_step
            and list(self.save_steps) == list(other.save_steps)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like smdebug's

    def __repr__(self) -> str:
        return (
            f"SaveConfigMode(save_interval={self.save_interval}, start_step={self.start_step}, "
            f"end_step={self.end_step}, save_steps={self.save_steps})"
        )


def _mode_key(key: Any) -> ModeKeys | None:
    """The mode a dict key names, or None when it is not a mode."""
    if isinstance(key, ModeKeys):
        return key
    if isinstance(key, str) and key.strip().upper() in ALLOWED_MODE_NAMES:
        return ModeKeys[key.strip().upper()]
    if isinstance(key, int) and not isinstance(key, bool):
        try:
            return parse_mode(key)
        except SMDebugValueError:
            return None
    return None


def _as_mode_config(
    value: Any, mode: ModeKeys, default_values: Mapping[str, Any] | None = None
) -> SaveConfigMode | None:
    if value is None or isinstance(value, SaveConfigMode):
        return value
    if isinstance(value, Mapping):
        return SaveConfigMode.from_dict(value, default_values)
    raise type_error(f"mode_save_configs[{mode.name}]", value, "a SaveConfigMode, a dict or None")


class SaveConfig:
    """One SaveConfigMode (or None, meaning "inherit") per mode.

    ``SaveConfig(save_interval=...)`` gives every mode the same schedule.
    ``SaveConfig({modes.TRAIN: SaveConfigMode(...)})`` leaves the other modes None so that a
    collection can inherit them from the hook (``merge_default_save_config``). Unlike smdebug, a
    None mode of a SaveConfig built in code is never an error: ``get_save_config`` answers with
    the default schedule, as the user docs promise. One read from a collections file behaves as
    smdebug's did: a mode stored as null raises SMDebugValueError. Passing generic arguments
    together with ``mode_save_configs`` fills the modes not listed with those arguments.

    Modes that ``merge_default_save_config(None, ...)`` fills (a hook completing its own
    schedule) are still written as null in the collections file, as smdebug writes the modes a
    user never configured.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        _schedules_changed()

    def __init__(
        self,
        mode_save_configs: Mapping[Any, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int | str] | str | None = None,
    ) -> None:
        generic = (save_interval, start_step, end_step, save_steps)
        self.mode_save_configs: dict[ModeKeys, SaveConfigMode | None]
        if mode_save_configs is None:
            self.mode_save_configs = {m: SaveConfigMode(*generic) for m in ALLOWED_MODES}
            return
        if not isinstance(mode_save_configs, Mapping):
            raise type_error(
                "mode_save_configs", mode_save_configs, "a dict of mode -> SaveConfigMode"
            )
        given: dict[ModeKeys, SaveConfigMode | None] = {}
        for key, value in mode_save_configs.items():
            mode = parse_mode(key, argument="mode_save_configs key")
            given[mode] = _as_mode_config(value, mode)
        fill_generic = any(v is not None for v in generic)
        self.mode_save_configs = {
            m: given[m] if m in given else (SaveConfigMode(*generic) if fill_generic else None)
            for m in ALLOWED_MODES
        }

    # -- queries ----------------------------------------------------------------------------

    def get_save_config(self, mode: Any) -> SaveConfigMode:
        """The schedule for ``mode``; a mode left None gets the default schedule."""
        # Called for every collection on every checked step: ModeKeys skip parse_mode.
        mode = mode if mode.__class__ is ModeKeys else parse_mode(mode)
        cfg = self.mode_save_configs[mode]
        if cfg is not None:
            return cfg
        source = self.__dict__.get("_read_from")
        if source is not None:
            raise SMDebugValueError(
                f"{source}: save config of mode {mode.name} was not set when the data was "
                "written (stored as null); no schedule is known for it"
            )
        # Made once per mode: a new SaveConfigMode counts as a schedule change, and a hook that
        # saw one on every step would recheck every collection on every step.
        unset = self.__dict__.setdefault("_unset_defaults", {})
        if mode not in unset:
            unset[mode] = SaveConfigMode()
        return unset[mode]

    def get_mode_config(self, mode: Any) -> SaveConfigMode | None:
        """The schedule exactly as configured (None = not set, to be inherited)."""
        return self.mode_save_configs[parse_mode(mode)]

    def set_save_config(self, mode: Any, save_config_mode: SaveConfigMode | None) -> None:
        m = parse_mode(mode)
        self.mode_save_configs[m] = _as_mode_config(save_config_mode, m)
        self.__dict__.get("_unset_fills", {}).pop(m, None)
        _schedules_changed()

    def mark_read_from(self, source: str) -> None:
        """This config was read from `source` (a collections file): a null mode is an error."""
        object.__setattr__(self, "_read_from", source)

    def _unset_fill(self, mode: ModeKeys) -> bool:
        """True while `mode` still holds the schedule merge_default_save_config(None) filled in."""
        fill = self.__dict__.get("_unset_fills", {}).get(mode)
        if fill is None:
            return False
        obj, snapshot = fill
        return self.mode_save_configs.get(mode) is obj and obj == snapshot

    def missing_modes(self) -> list[ModeKeys]:
        return [m for m, cfg in self.mode_save_configs.items() if cfg is None]

    def is_complete(self) -> bool:
        return not self.missing_modes()

    def should_save_step(self, mode: Any, step_num: int) -> bool:
        return self.get_save_config(mode).should_save_step(step_num)

    # -- merging ----------------------------------------------------------------------------

    def merge_default_save_config(
        self,
        default_save_config: SaveConfig | SaveConfigMode | None,
        fallback: SaveConfigMode | None = None,
    ) -> None:
        """Fill the None modes in place from ``default_save_config`` (a collection inheriting
        from the hook).

        Where it has no schedule for a mode either, ``fallback`` (or the 500-step default) is
        used, so the result is always complete. Modes filled while ``default_save_config`` is
        None count as never set: ``to_json_dict`` writes them as null.
        """
        default = default_save_config
        unset_fills = self.__dict__.setdefault("_unset_fills", {})
        for mode in ALLOWED_MODES:
            if self.mode_save_configs[mode] is not None:
                continue
            source: SaveConfigMode | None
            if isinstance(default, SaveConfig):
                source = default.mode_save_configs[mode]
            elif isinstance(default, SaveConfigMode) or default is None:
                source = default
            else:
                raise type_error("default_save_config", default,
                                 "a SaveConfig, a SaveConfigMode or None")
            if source is None:
                source = fallback.copy() if fallback is not None else SaveConfigMode()
            self.mode_save_configs[mode] = source
            if default is None:
                unset_fills[mode] = (source, source.copy())
            _schedules_changed()

    def copy(self) -> SaveConfig:
        twin = SaveConfig(
            {m: (c.copy() if c is not None else None) for m, c in self.mode_save_configs.items()}
        )
        fills = {
            m: (twin.mode_save_configs[m], self.mode_save_configs[m].copy())  # type: ignore[union-attr]
            for m in ALLOWED_MODES
            if self._unset_fill(m)
        }
        if fills:
            object.__setattr__(twin, "_unset_fills", fills)
        return twin

    # -- (de)serialisation ------------------------------------------------------------------

    def to_json_dict(self) -> dict[str, dict[str, Any] | None]:
        return {
            m.name: (cfg.to_json_dict() if cfg is not None and not self._unset_fill(m) else None)
            for m, cfg in self.mode_save_configs.items()
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(
        cls, params: Mapping[Any, Any], default_values: Mapping[str, Any] | None = None
    ) -> SaveConfig:
        """Accept the collections-file form (mode name -> dict|null; ModeKeys keys also work)
        or a flat SaveConfigMode dict such as ``{"save_interval": 10}`` for all modes."""
        if isinstance(params, SaveConfig):
            return params
        if not isinstance(params, Mapping):
            raise type_error("save_config", params, "a dict")
        keys = list(params)
        if keys and all(isinstance(k, str) and k in SAVE_CONFIG_MODE_KEYS for k in keys):
            mode_cfg = SaveConfigMode.from_dict(params, default_values)
            return cls({m: mode_cfg.copy() for m in ALLOWED_MODES})
        modes: dict[ModeKeys, SaveConfigMode | None] = {}
        for key, value in params.items():
            mode = _mode_key(key)
            if mode is None:
                raise SMDebugValueError(
                    f"save_config has the unknown key {key!r} (value {value!r}); expected mode "
                    f"names ({', '.join(ALLOWED_MODE_NAMES)}) or the keys "
                    f"{', '.join(SAVE_CONFIG_MODE_KEYS)}"
                )
            modes[mode] = _as_mode_config(value, mode, default_values)
        return cls(modes)

    @classmethod
    def from_json(cls, json_str: str) -> SaveConfig:
        return cls.from_dict(json.loads(json_str))

    @classmethod
    def from_save_config_mode(cls, save_config_mode: SaveConfigMode) -> SaveConfig:
        return cls({m: save_config_mode.copy() for m in ALLOWED_MODES})

    @classmethod
    def parse(cls, obj: Any) -> SaveConfig:
        """Normalise what users pass as a save_config: None, SaveConfig, SaveConfigMode or dict."""
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls.from_save_config_mode(obj)
        if isinstance(obj, Mapping):
            return cls.from_dict(obj)
        raise type_error("save_config", obj, "a SaveConfig, a SaveConfigMode, a dict or None")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self.mode_save_configs == other.mode_save_configs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        cfgs = list(self.mode_save_configs.values())
        first = cfgs[0]
        if first is not None and all(c == first for c in cfgs):
            return (
                f"SaveConfig(save_interval={first.save_interval}, start_step={first.start_step}, "
                f"end_step={first.end_step}, save_steps={first.save_steps})"
            )
        inner = ", ".join(f"modes.{m.name}: {c!r}" for m, c in self.mode_save_configs.items())
        return f"SaveConfig(mode_save_configs={{{inner}}})"
