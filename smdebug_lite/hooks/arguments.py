"""The constructor arguments every hook shares: declared once, checked in one place.

`check_hook_arguments` declares them (names, order, defaults, annotations) and checks them.
`hook_constructor` gives each hook's ``__init__`` that signature (PyTorch, Keras and XGBoost hooks,
and the Lightning and Hugging Face callbacks, whose own arguments follow the shared ones), so
``inspect.signature``, ``help()`` and positional calls see one list written in one place.

A wrong type or value is refused the same way everywhere, at construction, with an error naming
the argument, the value and what was expected (`ArgumentTypeError`, a TypeError and a
SMDebugValueError, or SMDebugValueError). Everything smdebug 1.0.34 accepted and used is still
accepted: nested lists of collection names, a single name or regex as a str, SaveConfig /
SaveConfigMode / dict save configs, truthy flags.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from smdebug_lite.config.arguments import (
    check_choice,
    check_flag,
    check_instance,
    check_names,
    check_path,
    check_regexes,
    parse_mode,
    renamed,
    value_error,
)
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugRuntimeError, SMDebugTypeError, SMDebugValueError
from smdebug_lite.modes import ModeKeys
from smdebug_lite.storage import is_s3_path
from smdebug_lite.storage.s3 import parse_s3_uri

INCLUDE_WORKERS = ("one", "all")


@dataclass
class HookArguments:
    """The shared arguments, normalised: paths are str, flags bool, lists lists. A hook keeps
    them as `HookCore.arguments`, with its defaults worked out (absolute out_dir, its save
    interval, raw tensors saved), and shows them as smdebug's attributes (`hook.out_dir`, ...)."""

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
    detect_non_finite: bool = False  # check every step for NaN/Inf and record where it began


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
    out_dir: str,
    export_tensorboard: bool = False,
    tensorboard_dir: str | None = None,
    dry_run: bool = False,
    reduction_config: ReductionConfig | None = None,
    save_config: SaveConfig | SaveConfigMode | dict | None = None,
    include_regex: str | Iterable[str] | None = None,
    include_collections: str | Iterable[str] | None = None,
    save_all: bool = False,
    include_workers: str = "one",
    *,
    detect_non_finite: bool = False,
) -> HookArguments:
    """Every shared hook argument checked and normalised. Its parameters are the declaration of
    the hooks' shared constructor arguments (`hook_constructor`)."""
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
        detect_non_finite=check_flag("detect_non_finite", detect_non_finite),
    )


SHARED_PARAMETERS = tuple(inspect.signature(check_hook_arguments).parameters.values())
_NO_ANNOTATION = inspect.Parameter.empty

Constructor = Callable[..., None]


def hook_constructor(*, optional_out_dir: bool = False, untyped: tuple[str, ...] = ()
                     ) -> Callable[[Constructor], Constructor]:
    """Decorate ``__init__(self, shared: dict[str, Any], <own arguments>)`` so that its public
    signature is the shared arguments (`SHARED_PARAMETERS`), then its own. It is called with the
    shared arguments as given (defaults filled in, in their order) and its own by name.

    `optional_out_dir`: out_dir defaults to None (a callback that can read DebugHookConfig
    JSON instead; XGBoost's hook); `untyped`: shared arguments shown without an annotation (the
    XGBoost hook's `reduction_config`, which it ignores, has always been shown so)."""

    def decorate(body: Constructor) -> Constructor:
        own = inspect.signature(body)
        self_param, _, *extra = own.parameters.values()
        shared = []
        for p in SHARED_PARAMETERS:
            if p.name == "out_dir" and optional_out_dir:
                p = p.replace(default=None, annotation="str | None")
            if p.name in untyped:
                p = p.replace(annotation=_NO_ANNOTATION)
            shared.append(p)
        # (keyword-only shared arguments follow every positional one: positional calls bind
        # as before when a keyword-only argument is added)
        ordered = sorted([*shared, *extra], key=lambda p: p.kind)
        signature = inspect.Signature([self_param, *ordered],
                                      return_annotation=own.return_annotation)
        names = [p.name for p in shared]
        extra_names = [p.name for p in extra]

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            body(self, {n: given[n] for n in names}, **{n: given[n] for n in extra_names})

        __init__.__signature__ = signature  # type: ignore[attr-defined]
        __init__.__doc__ = body.__doc__
        __init__.__module__ = body.__module__
        __init__.__qualname__ = body.__qualname__
        return __init__

    return decorate


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
    "SHARED_PARAMETERS",
    "check_hook_arguments",
    "hook_constructor",
    "check_start_step",
    "check_out_dir",
    "check_reduction_config",
    "check_save_config",
]
