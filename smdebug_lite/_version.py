"""The package's version, which comes from the git tag it was built from (hatch-vcs).

A build (wheel, sdist, editable install) writes ``_build_version.py`` beside this file; in a
checkout that file is git-ignored and holds the version of the checkout's last build. A checkout
that was never built (``PYTHONPATH=<checkout>``) reports the installed distribution's version if
there is one, else a placeholder that sorts below every release.
"""

from __future__ import annotations

UNKNOWN_VERSION = "0.0.0+unknown"


def _resolve() -> str:
    import importlib
    from importlib.metadata import PackageNotFoundError, version

    try:
        # Imported by name: the module exists only where a build wrote it (it imports nothing).
        built = importlib.import_module("smdebug_lite._build_version")
    except ImportError:
        pass
    else:
        return str(built.__version__)
    try:
        return version("smdebug-lite")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


__version__ = _resolve()
