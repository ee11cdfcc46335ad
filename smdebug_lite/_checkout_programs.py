"""The container programs' import names in a source checkout.

The training image's program (``container/``) and the rule evaluator's (``rule_runner/``) sit at
the repository's top level, and a built wheel installs them inside this package as
``smdebug_lite.container`` and ``smdebug_lite.rule_runner`` (pyproject.toml maps them there), so
an installed copy never owns a generic top-level module. A checkout has no such subpackages, so
a finder limited to those two names resolves them to the top-level directories. Nothing else of
the repository (tests, scripts) becomes part of the package.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# subpackage name under smdebug_lite -> its directory at the repository's top level
PROGRAM_DIRS = {"container": "container", "rule_runner": "rule_runner"}


class ProgramFinder(importlib.abc.MetaPathFinder):
    """Finds ``<package>.<program>`` in the checkout's top-level directory of that program."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs  # full module name -> directory

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        directory = self.dirs.get(fullname)
        if directory is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, directory / "__init__.py", submodule_search_locations=[str(directory)])


def map_checkout_programs(package: str, init_file: str) -> None:
    """Install the finder when the package (its ``__init__.py`` at `init_file`) runs from a
    checkout: a pyproject.toml beside it, the program directories there, and none of them inside
    the package (where a wheel puts them)."""
    package_dir = Path(init_file).resolve().parent
    repo = package_dir.parent
    if not (repo / "pyproject.toml").is_file():
        return
    dirs = {f"{package}.{name}": repo / top for name, top in PROGRAM_DIRS.items()
            if (repo / top / "__init__.py").is_file() and not (package_dir / name).exists()}
    if not dirs:
        return
    for finder in sys.meta_path:
        if type(finder).__name__ == ProgramFinder.__name__ and getattr(finder, "dirs", None) == dirs:
            return  # the package was imported again (a test that reloads it)
    sys.meta_path.append(ProgramFinder(dirs))
