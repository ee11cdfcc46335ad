"""smdebug's PyTorch collection extra: select a module's inputs/outputs by module object."""

from __future__ import annotations

from typing import Any

from smdebug_lite.config.collection import Collection as _BaseCollection
from smdebug_lite.config.collection import CollectionKeys
from smdebug_lite.config.collection_manager import CollectionManager as _BaseCollectionManager


class Collection(_BaseCollection):
    """A collection that can also name modules whose inputs and/or outputs it saves.

    The modules become regexes (``<module name>_input_`` / ``_output_``) when the hook prepares
    its collections, once the registered model tells it the modules' names.
    """

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(name, *args, **kwargs)
        self._modules: dict[Any, tuple[bool, bool]] = {}

    def add_module_tensors(self, module: Any, inputs: bool = False, outputs: bool = True) -> None:
        self.modules[module] = (bool(inputs), bool(outputs))

    @property
    def modules(self) -> dict[Any, tuple[bool, bool]]:
        # (a shared collection turned into this class in place has none yet)
        modules = self.__dict__.get("_modules")
        if modules is None:
            modules = self._modules = {}
        return modules


def as_pytorch_collection(coll: _BaseCollection) -> Collection:
    """Give a collection made by the shared CollectionManager the PyTorch extras, in place."""
    if not isinstance(coll, Collection):
        coll.__class__ = Collection
    return coll  # type: ignore[return-value]


class CollectionManager(_BaseCollectionManager):
    """The PyTorch built-ins (weights, biases, gradients, losses, ...) made with this module's
    Collection, as code written for ``smdebug.pytorch.collection`` constructs it."""

    def __init__(self, create_default: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("framework", "pytorch")
        super().__init__(create_default=create_default, **kwargs)
        for name in list(self.collections):
            as_pytorch_collection(self.collections[name])

    def create_collection(self, name: str, cls: type[_BaseCollection] = Collection) -> Collection:
        return as_pytorch_collection(super().create_collection(name, cls))


__all__ = ["Collection", "CollectionKeys", "CollectionManager", "as_pytorch_collection"]
