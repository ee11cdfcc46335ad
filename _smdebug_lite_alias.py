"""Make ``import smdebug`` resolve to smdebug_lite when real smdebug is not installed.

Installed as a top-level module and activated by ``smdebug_lite-alias.pth`` at interpreter start.
It must stay dependency-free and cheap: it only registers a finder; nothing is imported until
user code asks for ``smdebug``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

_ALIAS = "smdebug"
_TARGET = "smdebug_lite"
# Modules smdebug exposed that have no home in smdebug_lite's own layout (``smdebug.core.*``,
# ``smdebug.pytorch.singleton_utils``, ...) are served from this compatibility package.
_COMPAT = "smdebug_lite.compat"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec):  # type: ignore[override]
        return importlib.import_module(self._target)

    def exec_module(self, module) -> None:  # the target module is already executed
        return None


class SmdebugAliasFinder(importlib.abc.MetaPathFinder):
    """Serves ``smdebug[.x.y]`` from ``smdebug_lite[.x.y]`` unless a real smdebug exists.

    It sits first on ``sys.meta_path``: once ``smdebug`` is the alias, the normal path finder
    would otherwise load ``smdebug.exceptions`` a second time from smdebug_lite's directory,
    giving duplicate classes that ``except`` clauses would not match.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname == _ALIAS:
            if self._real_smdebug_available():
                return None
        elif fullname.startswith(_ALIAS + "."):
            parent = sys.modules.get(_ALIAS)
            if parent is None or parent is not sys.modules.get(_TARGET):
                return None
        else:
            return None
        target_name = _resolve(fullname[len(_ALIAS) :])
        if target_name is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(target_name), is_package=True)

    @staticmethod
    def _real_smdebug_available() -> bool:
        for finder in sys.meta_path:
            if isinstance(finder, SmdebugAliasFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                if find(_ALIAS, None) is not None:
                    return True
            except Exception:  # a broken third-party finder must not break imports
                continue
        return False


def _resolve(suffix: str) -> str | None:
    """``.core.modes`` -> the smdebug_lite module serving it: our own first, then the compat one."""
    candidates = [_TARGET + suffix]
    if suffix:
        candidates.append(_COMPAT + suffix)
    for name in candidates:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ModuleNotFoundError:
            continue
    return None


def install() -> None:
    """Register the finder once (idempotent); called from the .pth file and from tests."""
    if not any(isinstance(f, SmdebugAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SmdebugAliasFinder())

