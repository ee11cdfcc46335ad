"""``smdebug.core.collection_manager``: smdebug's CollectionManager defaults.

smdebug_lite's ``CollectionManager`` already reads and writes smdebug's interface
(``export(out_dir, filename)``, ``load(filename, collection_class)``, ``update_meta``,
``get(name, create=...)``). This subclass only changes the two defaults smdebug's callers
rely on, and it is one for every ``isinstance`` check and writes the same file:

* it starts empty: smdebug's base manager never created built-ins (framework managers do);
* ``get(name)`` creates a missing collection (``create=False`` raises ``CollectionNotFound``,
  a KeyError); ``cm[name]`` never creates.

``load_from_string`` also takes the file's dict, and gives None for None or ``"None"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from smdebug_lite.config.collection import Collection
from smdebug_lite.config.collection_manager import CollectionManager as _LiteCollectionManager

# The top-level keys of a collections file.
ALLOWED_PARAMS = ["collections", "_meta"]


class CollectionManager(_LiteCollectionManager):
    """Named collections plus the run's ``_meta``, with smdebug's defaults."""

    def __init__(
        self,
        collections: Mapping[str, Collection] | Iterable[Collection] | None = None,
        create_default: bool = False,
        framework: str | None = None,
        extensions: bool = False,
        num_workers: int = 1,
    ) -> None:
        super().__init__(
            collections=collections,
            # smdebug's base manager ignored create_default; a framework's manager honours it.
            create_default=bool(create_default and framework is not None),
            framework=framework,
            extensions=extensions,
            num_workers=num_workers,
        )

    def get(  # type: ignore[override]
        self, name: str, create: bool = True, *, create_if_not_exists: bool | None = None
    ) -> Collection:
        if create_if_not_exists is not None:
            create = create_if_not_exists
        return super().get(name, create)

    def __getitem__(self, name: str) -> Collection:
        return super().get(name, False)

    @property
    def _meta(self) -> dict[str, Any]:
        """The file's ``_meta`` object, as smdebug kept it."""
        return self.to_json_dict()["_meta"]

    @classmethod
    def load_from_string(  # type: ignore[override]
        cls,
        s: str | bytes | Mapping[str, Any] | None,
        collection_class: type[Collection] = Collection,
        source: str = "<string>",
    ) -> CollectionManager | None:
        if s is None or s == "None":
            return None
        if isinstance(s, Mapping):
            return cls.from_dict(s, source, collection_class)
        return super().load_from_string(s, collection_class, source)


__all__ = ["ALLOWED_PARAMS", "CollectionManager"]
