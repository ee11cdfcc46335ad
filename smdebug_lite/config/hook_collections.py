"""A new hook's collections: the framework's built-ins, and which of them the hook includes.

A hook starts from its framework's built-in collections (smdebug's names and regexes), includes
what its arguments name plus the framework's defaults, and adds ``include_regex`` to the
``default`` collection and ``save_all`` to the ``all`` collection, including those too.
smdebug-lite's extra built-ins (PyTorch's ``inputs`` and ``outputs``) are not created here:
they exist only once asked for (included, or fetched with ``get_collection``), since smdebug's
collections file never listed them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from smdebug_lite.config.collection import (
    CollectionKeys,
    builtin_collections,
    default_include_collections,
)
from smdebug_lite.config.collection_manager import CollectionManager


@dataclass
class HookCollections:
    """A hook's collections as its arguments configure them."""

    manager: CollectionManager
    included: list[str]  # the included collections' names, in order, without repeats
    extensions: dict[str, list[str]]  # extra built-ins made on request: name -> regexes


def resolve_collections(framework: str, include_regex: str | Iterable[str] | None,
                        include_collections: str | Iterable[str] | None,
                        save_all: bool) -> HookCollections:
    """The collections of a `framework`'s hook built with these arguments."""
    manager = CollectionManager()
    plain = builtin_collections(framework)
    for name, regexes in plain.items():
        manager.get(name, create_if_not_exists=True).include(regexes)
    extended = builtin_collections(framework, extensions=True)
    extensions = {n: r for n, r in extended.items() if n not in plain}
    included: list[str] = []
    if isinstance(include_collections, str):
        include_collections = [include_collections]
    for name in list(include_collections or []) + default_include_collections(framework):
        if name not in included:
            included.append(name)
    if include_regex:
        regexes = [include_regex] if isinstance(include_regex, str) else list(include_regex)
        manager.get(CollectionKeys.DEFAULT).include(regexes)
        if CollectionKeys.DEFAULT not in included:
            included.append(CollectionKeys.DEFAULT)
    if save_all:
        manager.get(CollectionKeys.ALL).include(".*")
        if CollectionKeys.ALL not in included:
            included.append(CollectionKeys.ALL)
    return HookCollections(manager, included, extensions)


__all__ = ["HookCollections", "resolve_collections"]
