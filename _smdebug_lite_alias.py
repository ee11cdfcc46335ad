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
        self._own_spec = None

    def create_module(self, spec):  # type: ignore[override]
        module = importlib.import_module(self._target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # The target module is already executed; the import system has just stamped the alias's
        # spec on it, so give it back its own (one module, one truthful __spec__).
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


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
        target = _resolve(fullname[len(_ALIAS) :])
        if target is None:
            return None
        is_package = target.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(target.name), is_package=is_package
        )

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


def _resolve(suffix: str) -> importlib.machinery.ModuleSpec | None:
    """``.core.modes`` -> the spec of the smdebug_lite module serving it: ours, then compat's."""
    candidates = [_TARGET + suffix]
    if suffix:
        candidates.append(_COMPAT + suffix)
    for name in candidates:
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            continue
        if spec is not None:
            return spec
    return None


class CompatSubmoduleFinder(importlib.abc.MetaPathFinder):
    """Serves the module ``smdebug_lite.<pkg>.<name>`` from ``smdebug_lite.compat.<pkg>.<name>``
    when the package has no such module of its own, while ``smdebug`` is the alias.

    ``from smdebug.tensorflow import utils`` looks the submodule up under the name of the module
    ``smdebug.tensorflow`` really is (``smdebug_lite.tensorflow``), not under the alias, so
    without this only a prior ``import smdebug.tensorflow.utils`` would make it work. It sits
    last on ``sys.meta_path``: it is asked only about names every other finder gave up on.
    """

    def find_spec(self, fullname, path=None, target=None):
        prefix = _TARGET + "."
        if not fullname.startswith(prefix) or fullname.startswith(_COMPAT + "."):
            return None
        if sys.modules.get(_ALIAS) is not sys.modules.get(_TARGET):
            return None
        name = _COMPAT + "." + fullname[len(prefix) :]
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            return None
        # Modules only: a package served under a second name would have its submodules found
        # through its __path__ and executed again under that name.
        if spec is None or spec.submodule_search_locations is not None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name))


def install() -> None:
    """Register the finders once (idempotent); called from the .pth file and from tests."""
    if not any(isinstance(f, SmdebugAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SmdebugAliasFinder())
    if not any(isinstance(f, CompatSubmoduleFinder) for f in sys.meta_path):
        sys.meta_path.append(CompatSubmoduleFinder())

