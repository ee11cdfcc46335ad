"""Command lines for Python child processes that run this same copy of smdebug_lite.

The writer process and the compacting process must import the library from wherever the parent
loaded it (a source tree, an editable install), without putting that directory ahead of the
standard library for anything else the child imports.
"""

from __future__ import annotations

import os
import sys

_BOOTSTRAP = (
    "import sys, importlib; root = sys.argv[1]; sys.path.insert(0, root); "
    "run = getattr(importlib.import_module(sys.argv[2]), sys.argv[3]); sys.path.remove(root); "
    "sys.exit(run(sys.argv[4:]))"
)


def package_root() -> str:
    """The directory holding this copy of the smdebug_lite package (this file is
    smdebug_lite/writer/child_process.py)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_argv(module: str, function: str, *args: str) -> list[str]:
    """argv for a child that calls `module.function(list_of_args)` and exits with what it returns."""
    return [sys.executable, "-c", _BOOTSTRAP, package_root(), module, function, *args]
