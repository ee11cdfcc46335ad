"""Griffe extensions for the API reference (mkdocs.yml), for what static analysis cannot see:

* `CheckoutPrograms`: ``smdebug_lite.container`` and ``smdebug_lite.rule_runner`` are the
  repository's top-level ``container/`` and ``rule_runner/`` (a wheel installs them there; a
  checkout maps them at import time). Without it, names the package re-exports from them
  (``smdebug_lite.distributed.RuleJob``) would be missing from the reference.
* `HookConstructorSignatures`: ``hooks.arguments.hook_constructor`` gives a hook's
  ``__init__(self, shared, <own>)`` its public signature at import time (the shared arguments,
  then its own). The reference shows that signature instead of ``Hook(shared)``.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "smdebug_lite"


def _program_dirs() -> dict[str, str]:
    """The package's own map (subpackage -> top-level directory), read without importing the
    package."""
    path = ROOT / PACKAGE / "_checkout_programs.py"
    spec = importlib.util.spec_from_file_location("_docs_checkout_programs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.PROGRAM_DIRS)


class CheckoutPrograms(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        for name, directory in _program_dirs().items():
            if name not in pkg.members and (ROOT / directory / "__init__.py").is_file():
                pkg.set_member(name, loader.load(directory))


def _functions(obj: griffe.Object) -> Iterator[griffe.Function]:
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        if isinstance(member, griffe.Function):
            yield member
        elif isinstance(member, (griffe.Class, griffe.Module)):
            yield from _functions(member)


def _shared_parameters(pkg: griffe.Module, decorator_path: str) -> list[griffe.Parameter]:
    """The parameters of the function whose signature the decorator's module takes as the
    shared arguments (``SHARED_PARAMETERS = ...signature(<function>)...``)."""
    module_path = decorator_path.rsplit(".", 1)[0]
    module = pkg.modules_collection[module_path]
    shared = module.members.get("SHARED_PARAMETERS")
    found = re.search(r"signature\((\w+)\)", str(getattr(shared, "value", "")))
    if found is None or found.group(1) not in module.members:
        raise ValueError(f"{module_path}: SHARED_PARAMETERS no longer names the function whose "
                         "signature the hooks share; update scripts/docs_griffe.py")
    return list(module.members[found.group(1)].parameters)


class HookConstructorSignatures(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        for function in _functions(pkg):
            decorator = next((d for d in function.decorators
                              if d.callable_path.endswith(".hook_constructor")), None)
            if decorator is None or function.name != "__init__":
                continue
            text = str(decorator.value)
            untyped = set(re.findall(r"[\"'](\w+)[\"']",
                                     (re.search(r"untyped=\(([^)]*)\)", text) or ["", ""])[1]))
            shared = []
            for p in _shared_parameters(pkg, decorator.callable_path):
                annotation, default = p.annotation, p.default
                if p.name == "out_dir" and "optional_out_dir=True" in text:
                    annotation, default = "str | None", "None"
                if p.name in untyped:
                    annotation = None
                shared.append(griffe.Parameter(p.name, annotation=annotation, kind=p.kind,
                                               default=default))
            self_param, _shared_dict, *own = function.parameters
            function.parameters = griffe.Parameters(self_param, *shared, *own)
