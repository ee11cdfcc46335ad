"""The ``smdebug-lite`` command: one Typer app, one module per command group."""

from __future__ import annotations

import logging
import os
import sys

import typer

from smdebug_lite._version import __version__

HELP = """Look at SageMaker Debugger trials (written by smdebug-lite or smdebug) from a shell.

TRIAL is a local directory or an s3://bucket/prefix. Exit codes: 0 ok; 1 rules found issues;
2 bad arguments or a rule error; 3 no trial there; 4 unknown tensor or collection; 5 nothing
saved at that step or mode; 6 unreadable or damaged files; 7 optional feature not installed;
8 the output exists; watch: 2 also when the trial stopped being written, 130 interrupted.

Examples:

    smdebug-lite summary ./my-trial

    smdebug-lite ls ./my-trial --collection gradients --json

    smdebug-lite show ./my-trial CrossEntropyLoss_output_0

    smdebug-lite rules ./my-trial --rule VanishingGradient -p threshold=1e-6

    smdebug-lite watch ./my-trial --rule LossNotDecreasing

    smdebug-lite export ./my-trial ./my-trial.parquet
"""


def _quiet_library_logs() -> None:
    """Library logs go to stderr (stdout carries tables and JSON), warnings and up unless
    SMDEBUG_LOG_LEVEL asks for more."""
    from smdebug_lite.log.logger import get_logger

    root = get_logger()
    if "SMDEBUG_LOG_LEVEL" not in os.environ:
        root.setLevel(logging.WARNING)
    for h in root.handlers:
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stdout:
            h.setStream(sys.stderr)
    logging.getLogger("rule_runner").setLevel(logging.CRITICAL)  # its errors become our rows


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"smdebug-lite {__version__}\n")
        raise typer.Exit()


def build_app() -> typer.Typer:
    from smdebug_lite.cli.export import export, tensorboard
    from smdebug_lite.cli.listing import ls
    from smdebug_lite.cli.report import compact, report
    from smdebug_lite.cli.rules import rules
    from smdebug_lite.cli.show import show
    from smdebug_lite.cli.summary import summary
    from smdebug_lite.cli.watch import watch

    app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False,
                      rich_markup_mode=None, pretty_exceptions_enable=False)

    @app.callback()
    def _root(version: bool = typer.Option(False, "--version", callback=_version,
                                           is_eager=True, help="print the version")) -> None:
        _quiet_library_logs()

    for fn, name in ((summary, "summary"), (ls, "ls"), (show, "show"), (rules, "rules"),
                     (export, "export"), (report, "report"), (tensorboard, "tensorboard"),
                     (compact, "compact"), (watch, "watch")):
        app.command(name)(fn)
    return app
