"""``smdebug.tensorflow.collection``: the Keras hook's TF ``Collection``
(`smdebug_lite.tensorflow.keras_collection`), and a ``CollectionManager`` with smdebug's defaults.

``CollectionManager()`` starts with the TensorFlow built-ins, with smdebug's regexes, all of them
that ``Collection``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from smdebug_lite.compat.core.collection_manager import CollectionManager as _CoreManager
from smdebug_lite.config.collection import Collection as _BaseCollection
from smdebug_lite.tensorflow.keras_collection import Collection, CollectionKeys, as_tf_collection


class CollectionManager(_CoreManager):
    """The TensorFlow built-ins (weights, biases, gradients, losses, metrics, inputs, outputs,
    layers, sm_metrics, optimizer_variables, all, default), all of them the TF Collection."""

    def __init__(
        self,
        collections: Iterable[_BaseCollection] | None = None,
        create_default: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("framework", "tensorflow")
        super().__init__(collections=collections, create_default=create_default, **kwargs)
        for coll in self.collections.values():
            as_tf_collection(coll)

    def create_collection(  # type: ignore[override]
        self, name: str, cls: type[_BaseCollection] = Collection
    ) -> Collection:
        return as_tf_collection(super().create_collection(name, cls))

    def get(  # type: ignore[override]
        self, name: str, create: bool = True, *, create_if_not_exists: bool | None = None
    ) -> Collection:
        coll = super().get(name, create, create_if_not_exists=create_if_not_exists)
        return as_tf_collection(coll)

    def add(self, arg: Any) -> _BaseCollection | None:
        added = super().add(arg)
        for coll in self.collections.values():
            as_tf_collection(coll)
        return added

    @classmethod
    def load(  # type: ignore[override]
        cls, filename: str, coll_class: type[_BaseCollection] = Collection
    ) -> _CoreManager:
        return super().load(filename, coll_class)

    @classmethod
    def load_from_string(  # type: ignore[override]
        cls, s: Any, coll_class: type[_BaseCollection] = Collection, source: str = "<string>"
    ) -> _CoreManager | None:
        return super().load_from_string(s, coll_class, source)


__all__ = ["Collection", "CollectionKeys", "CollectionManager", "as_tf_collection"]
