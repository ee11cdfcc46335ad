"""Modules imported on first attribute access, so collecting a test module stays cheap.

Every pytest-xdist worker imports every test module; TensorFlow, transformers, xgboost and the
SageMaker SDK take seconds each, so test modules bind them through `lazy` and pay only when a
test that uses them runs. A missing module skips that test, as `pytest.importorskip` would.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from typing import Any

import pytest

_PROBES = ("_pytest", "_mock", "__test__", "__wrapped__", "__bases__")


class LazyModule(types.ModuleType):
    """Stands in for a module until an attribute is read, then imports it and delegates."""

    def __init__(self, name: str, skip: bool = True) -> None:
        super().__init__(name)
        for attr in ("__doc__", "__package__", "__loader__", "__spec__"):  # the module's own
            del self.__dict__[attr]
        self.__dict__["_lazy_skip"] = skip
        self.__dict__["_lazy_module"] = None

    def _lazy_load(self) -> types.ModuleType:
        module = self.__dict__["_lazy_module"]
        if module is None:
            name = self.__name__
            if self.__dict__["_lazy_skip"]:
                module = pytest.importorskip(name)
            else:
                module = importlib.import_module(name)
            self.__dict__["_lazy_module"] = module
        return module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith(_PROBES):  # what pytest asks of every module-level name it collects
            raise AttributeError(attr)
        return getattr(self._lazy_load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._lazy_load(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._lazy_load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._lazy_load())


def lazy(name: str, skip: bool = True) -> Any:
    """`name` as a module imported on first use (skipping the test if `skip` and it is missing)."""
    return LazyModule(name, skip)


def loaded(module: Any) -> types.ModuleType:
    """The real module behind a `lazy` one (imported now), for what reads a module's `__dict__`
    itself, such as `monkeypatch.setattr`."""
    return module._lazy_load() if isinstance(module, LazyModule) else module


def require_module(*names: str) -> None:
    """At a test module's top: skip the module where one of `names` (top-level packages) cannot
    be found, as a module-level `pytest.importorskip` would, without importing it (for modules
    that run it only in a subprocess, or bind it through `lazy`)."""
    for name in names:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"could not import {name!r}", allow_module_level=True)
