"""The ``smdebug-lite`` command: look at trials from a shell (summary, ls, show, rules, export,
report, tensorboard, compact). Needs the ``cli`` extra (typer, rich)."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    try:
        from smdebug_lite.cli.app import build_app
    except ImportError as e:
        import sys

        sys.stderr.write(f"error: the smdebug-lite command needs the 'cli' extra ({e}); "
                         "install it with: pip install 'smdebug-lite[cli]'\n")
        raise SystemExit(7) from None
    build_app()(prog_name="smdebug-lite")
