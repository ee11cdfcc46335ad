"""Output: rich tables on stdout, progress and messages on stderr, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

# Piped output is not cut to 80 columns: long tensor names stay on one line.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*["" if v is None else str(v) for v in r])
    out.print(t)


def shows_progress(quiet: bool) -> bool:
    """Progress only for a person watching: not with --quiet, not when stderr is no terminal."""
    return not quiet and err.is_terminal


@contextmanager
def spinner(message: str, quiet: bool) -> Iterator[None]:
    if not shows_progress(quiet):
        yield
        return
    with err.status(message):
        yield


@contextmanager
def step_progress(description: str, quiet: bool) -> Iterator[Callable[..., None] | None]:
    """A progress bar driven by `callback(done, total, description=None)` (total None: not
    known); None when progress is off."""
    if not shows_progress(quiet):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int | None, description: str | None = None) -> None:
            if description is not None:
                bar.update(task, description=description)
            bar.update(task, completed=done, total=total)

        yield update
