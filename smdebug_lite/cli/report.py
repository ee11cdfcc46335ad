"""``smdebug-lite report`` and ``smdebug-lite compact``: commands over features installed apart."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import EXIT_MISSING_FEATURE, fail, handled
from smdebug_lite.cli.options import Json, Quiet
from smdebug_lite.cli.rules import Params, RuleFile, build_jobs, parse_params
from smdebug_lite.cli.trials import check_local_trial


def _feature(module: str, name: str, what: str) -> Any:
    """`module.name`, or a clear error when that part of smdebug-lite is not available."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        fail(f"{what} is not available in this installation ({module}.{name}: {e}); "
             "install it with: pip install 'smdebug-lite[all]'", EXIT_MISSING_FEATURE)


def report(trials: Annotated[list[str], typer.Argument(metavar="TRIAL...",
                                                       help="trial directories or s3:// URIs")],
           out: Annotated[str, typer.Option("--out", "-o", help="the HTML file to write")
                          ] = "report.html",
           rule: Annotated[list[str] | None, typer.Option(
               "--rules", "--rule", help="rule to evaluate and show (repeatable)")] = None,
           param: Params = None, rule_file: RuleFile = None, quiet: Quiet = False) -> None:
    """One self-contained HTML file: curves, gradient heatmaps, statistics, first NaN/Inf and
    the verdict of each rule.

    Examples:

        smdebug-lite report ./my-trial -o report.html

        smdebug-lite report ./my-trial --rules VanishingGradient --rules LossNotDecreasing
    """
    with handled():
        for t in trials:
            if "://" not in t:
                check_local_trial(t)
        write_report = _feature("smdebug_lite.report", "write_report", "The HTML report")
        jobs = build_jobs(trials, rule, parse_params(param), rule_file, None, None) if rule \
            else None
        path = write_report(list(trials), out, rules=jobs, progress=not quiet and
                            console.shows_progress(quiet))
    console.out.print(f"Wrote {path}")


def compact(trial: Annotated[str, typer.Argument(metavar="TRIAL",
                                                 help="trial directory or s3://bucket/prefix")],
            json: Json = False, quiet: Quiet = False) -> None:
    """Merge a finished trial's per-step index files so it opens faster.

    Example:

        smdebug-lite compact ./my-trial
    """
    with handled():
        if "://" not in trial:
            check_local_trial(trial)
        compact_trial = _feature("smdebug_lite.writer.compaction", "compact_trial",
                                 "Trial compaction")
        with console.spinner(f"Compacting {trial}", quiet or json):
            result = compact_trial(trial)
    if json:
        data = (dataclasses.asdict(result) if dataclasses.is_dataclass(result)
                and not isinstance(result, type) else {"summary": str(result)})
        console.print_json(data)
    else:
        console.out.print(str(result), markup=False)
