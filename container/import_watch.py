"""Run a callback right after a module is first imported, without importing it ourselves.

The launcher must not import PyTorch, TensorFlow or XGBoost for a script that never uses them
(importing is slow, and may grab GPU memory), yet must attach to whichever one the script does
import. A meta-path finder wraps the module's loader so the callback runs once it has loaded.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from types import ModuleType

from smdebug_lite.log.logger import get_logger

logger = get_logger("container.import_watch")

Callback = Callable[[ModuleType], None]


def _run(callback: Callback, module: ModuleType) -> None:
    try:
        callback(module)
    except Exception as e:  # never break the user's import
        logger.error("smdebug-lite could not attach to %s: %s: %s", module.__name__, type(e).__name__, e)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, finder: _Finder, name: str) -> None:
        self._inner = inner
        self._finder = finder
        self._name = name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        # Taken only now: a spec that was merely probed (importlib.util.find_spec, which
        # TensorFlow does for "keras" many times) is never executed and must not use them up.
        for cb in self._finder.callbacks.pop(self._name, []):
            _run(cb, module)

    def __getattr__(self, name: str):  # e.g. get_resource_reader, is_package
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._busy: set[str] = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
            if spec is None:
                for finder in sys.meta_path:
                    if finder is self or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self, fullname)
        return spec


_finder = _Finder()


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` once top-level module `name` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        _run(callback, module)
        return
    _finder.callbacks.setdefault(name, []).append(callback)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def forget() -> None:
    """Drop pending callbacks (tests, and the launcher once the script finished)."""
    _finder.callbacks.clear()
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
