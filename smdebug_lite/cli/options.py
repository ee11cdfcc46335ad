"""Options shared by the commands."""

from __future__ import annotations

from typing import Annotated

import typer

from smdebug_lite.cli.trials import DEFAULT_TIMEOUT_S

Trial = Annotated[str, typer.Argument(metavar="TRIAL", help="trial directory or s3://bucket/prefix")]
Json = Annotated[bool, typer.Option("--json", help="print JSON for scripts instead of tables")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")]
Timeout = Annotated[float, typer.Option(
    "--timeout", min=0, help="seconds to wait for data a running job has not written yet")]
Mode = Annotated[str | None, typer.Option(
    "--mode", "-m", help="TRAIN, EVAL, PREDICT or GLOBAL; steps are then that mode's steps")]
Collection = Annotated[str | None, typer.Option("--collection", "-c", help="only this collection")]
Regex = Annotated[str | None, typer.Option("--regex", "-r", help="only tensor names matching it")]
StartStep = Annotated[int | None, typer.Option("--start-step", min=0, help="first global step")]
EndStep = Annotated[int | None, typer.Option("--end-step", min=0,
                                             help="global step to stop before (exclusive)")]
DEFAULT_TIMEOUT = DEFAULT_TIMEOUT_S
