"""mkdocs hook: the command line reference page (docs/api/cli.md) gets each command's ``--help``,
generated from the Typer app at build time so that the page cannot drift from the command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- cli-reference -->"
PAGE = "api/cli.md"
WIDTH = 78  # fits the code column of the site


def _help_texts(root: Path) -> list[tuple[str, str]]:
    """(command line, help text) for the root command and each command, in the app's order."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # this checkout's package, not an installed copy
    import click
    import typer.main

    from smdebug_lite.cli.app import build_app

    command = typer.main.get_command(build_app())
    parent = click.Context(command, info_name="smdebug-lite", terminal_width=WIDTH,
                           max_content_width=WIDTH)
    texts = [("smdebug-lite", command.get_help(parent))]
    for name, sub in command.commands.items():
        ctx = click.Context(sub, info_name=name, parent=parent, terminal_width=WIDTH,
                            max_content_width=WIDTH)
        texts.append((f"smdebug-lite {name}", sub.get_help(ctx)))
    return texts


def reference_markdown(root: Path) -> str:
    sections = [f"## `{line}`\n\n```text\n{text.rstrip()}\n```\n"
                for line, text in _help_texts(root)]
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its {MARKER} line")
    root = Path(config["config_file_path"]).resolve().parent
    return markdown.replace(MARKER, reference_markdown(root))
