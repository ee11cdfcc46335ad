"""Optional dependencies of the export and command-line features, with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingOptionalDependency(ImportError):
    """An optional package a feature needs is not installed."""


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import `module`, or say which extra to install for `feature`."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingOptionalDependency(
            f"{feature} needs the '{module.split('.')[0]}' package, which is not installed "
            f"({e}); install it with: pip install 'smdebug-lite[{extra}]'"
        ) from None
