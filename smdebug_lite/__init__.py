"""smdebug-lite: a drop-in successor to Amazon SageMaker Debugger's smdebug library."""

from __future__ import annotations

from smdebug_lite import modes
from smdebug_lite._checkout_programs import map_checkout_programs as _map_checkout_programs
from smdebug_lite._version import __version__
from smdebug_lite.config import Collection as Collection
from smdebug_lite.config import CollectionKeys as CollectionKeys
from smdebug_lite.config import CollectionManager as CollectionManager
from smdebug_lite.config import ReductionConfig as ReductionConfig
from smdebug_lite.config import SaveConfig as SaveConfig
from smdebug_lite.config import SaveConfigMode as SaveConfigMode

# container/ and rule_runner/ as smdebug_lite.container and .rule_runner in a source checkout.
_map_checkout_programs(__name__, __file__)

_CONFIG_EXPORTS = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
]

__all__ = ["__version__", "modes", *_CONFIG_EXPORTS]
