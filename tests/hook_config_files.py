"""DebugHookConfig JSON files as SageMaker writes them, for the zero-code-change tests."""

from __future__ import annotations

import json
from pathlib import Path


def write_hook_config(tmp_path: Path, out: Path, collections: dict[str, dict[str, str] | None],
                      hook_parameters: dict[str, str] | None = None) -> Path:
    """``<tmp_path>/debughookconfig.json`` saving to `out`: each collection by name, with its
    CollectionParameters (string values, as the SDK sends them) or none."""
    doc: dict = {"LocalPath": str(out)}
    if hook_parameters is not None:
        doc["HookParameters"] = hook_parameters
    doc["CollectionConfigurations"] = [
        {"CollectionName": name, **({"CollectionParameters": params} if params else {})}
        for name, params in collections.items()
    ]
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(doc))
    return path
