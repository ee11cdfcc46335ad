"""The constructor arguments every hook shares, checked in one place.

PyTorch, Keras and XGBoost hooks all pass their arguments through `check_hook_arguments`, so a
wrong type or value is refused the same way everywhere, at construction, with an error naming
the argument, the value and what was expected (`ArgumentTypeError`, a TypeError and a
SMDebugValueError, or SMDebugValueError). Everything smdebug 1.0.34 accepted and used is still
accepted: nested lists of collection names, a single name or regex as a str, SaveConfig /
SaveConfigMode / dict save configs, truthy flags.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from smdebug_lite.config.arguments import (
    check_choice,
    check_flag,
    check_instance,
    check_names,
    check_path,
    check_regexes,
    renamed,
    value_error,
)
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig
from smdebug_lite.exceptions import SMDebugRuntimeError, SMDebugTypeError, SMDebugValueError
from smdebug_lite.modes import ModeKeys, parse_mode
from smdebug_lite.storage import is_s3_path
from smdebug_lite.storage.s3 import parse_s3_uri

INCLUDE_WORKERS = ("one", "all")


@dataclass
class HookArguments:
    """The shared arguments, normalised: paths are str, flags bool, lists lists."""

    out_dir: str
    export_tensorboard: bool
    tensorboard_dir: str | None
    dry_run: bool
    reduction_config: ReductionConfig | None
    save_config: SaveConfig | None  # None: the framework's default schedule
    include_regex: list[str] | None
    include_collections: list[str] | None
    save_all: bool
    include_workers: str


def check_out_dir(out_dir: Any) -> str:
    if out_dir is None:  # (smdebug's RuntimeError for a missing out_dir)
        raise SMDebugRuntimeError(
            "out_dir is a required argument: a directory path or an s3:// URI"
        )
    path: str = check_path("out_dir", out_dir)  # type: ignore[assignment]
    if is_s3_path(path):
        try:
            parse_s3_uri(path)
        except ValueError:
            raise value_error("out_dir", out_dir, "s3://bucket[/prefix] naming a bucket") from None
    return path


def check_reduction_config(value: Any) -> ReductionConfig | None:
    return check_instance(
        "reduction_config", value, ReductionConfig,
        "a ReductionConfig (e.g. ReductionConfig(reductions=['mean'])) or None",
    )


def check_save_config(value: Any) -> SaveConfig | None:
    if value is None:
        return None
    try:
        return SaveConfig.parse(value)
    except (SMDebugTypeError, SMDebugValueError) as exc:
        raise renamed("save_config", value, exc) from None


def check_hook_arguments(
    out_dir: Any,
    export_tensorboard: Any = False,
    tensorboard_dir: Any = None,
    dry_run: Any = False,
    reduction_config: Any = None,
    save_config: Any = None,
    include_regex: Any = None,
    include_collections: Any = None,
    save_all: Any = False,
    include_workers: Any = "one",
) -> HookArguments:
    """Every shared hook argument checked and normalised, in the constructor's order."""
    return HookArguments(
        out_dir=check_out_dir(out_dir),
        export_tensorboard=check_flag("export_tensorboard", export_tensorboard),
        tensorboard_dir=check_path("tensorboard_dir", tensorboard_dir or None, allow_none=True),
        dry_run=check_flag("dry_run", dry_run),
        reduction_config=check_reduction_config(reduction_config),
        save_config=check_save_config(save_config),
        include_regex=check_regexes("include_regex", include_regex),
        include_collections=check_names("include_collections", include_collections),
        save_all=check_flag("save_all", save_all, list_of_one=True),
        include_workers=check_choice("include_workers", include_workers, INCLUDE_WORKERS),
    )


def check_start_step(step: Any, mode: Any, current_step: int) -> tuple[int | None, ModeKeys | None]:
    """`start_step`'s arguments: `step` None or an int greater than `current_step` (steps only
    go forward: a step's files are named by its number), `mode` None or a mode."""
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise SMDebugTypeError(
                f"start_step: step={step!r} ({type(step).__name__}) must be an int or None")
        step = int(step)
        if step <= current_step:
            raise SMDebugValueError(
                f"start_step: step={step} must be greater than the current step {current_step} "
                "(steps only go forward)")
    return step, None if mode is None else parse_mode(mode, "start_step: mode")


__all__ = [
    "INCLUDE_WORKERS",
    "HookArguments",
    "check_hook_arguments",
    "check_start_step",
    "check_out_dir",
    "check_reduction_config",
    "check_save_config",
]
