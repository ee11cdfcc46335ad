"""The set of collections of a run, and the collections file that stores it.

File: ``{"collections": {name: <Collection JSON>, ...}, "_meta": {"num_workers": N}}`` with
``json.dumps`` default separators, as smdebug 1.0.x writes it. ``num_workers`` is what readers use
to decide when a step is complete, so loading insists on it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from smdebug_lite.config.collection import Collection, CollectionKeys, builtin_collections
from smdebug_lite.config.save_config import parse_int
from smdebug_lite.exceptions import SMDebugError, SMDebugTypeError, SMDebugValueError
from smdebug_lite.format.locations import COLLECTIONS_DIR


class CollectionNotFound(SMDebugError, KeyError):
    """A collection asked for by name does not exist (a KeyError too, as for a dict)."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        super().__init__(name)
        self.name = name
        self.available = list(available)

    def __str__(self) -> str:
        return (
            f"Collection {self.name!r} has not been created; "
            f"existing collections: {', '.join(self.available) or '(none)'}"
        )


def _num_workers(value: Any, where: str) -> int:
    try:
        n = parse_int(value, "num_workers")
    except SMDebugValueError:
        n = 0
    if n <= 0:
        raise SMDebugValueError(f"{where}: num_workers={value!r} must be a positive integer")
    return n


class CollectionManager:
    """Insertion-ordered collections plus the number of workers of the run.

    With ``create_default`` the built-ins of ``framework`` are created in the fixed order of
    ``builtin_collections`` (only ``all`` and ``default`` when no framework is given).
    """

    def __init__(
        self,
        collections: Mapping[str, Collection] | Iterable[Collection] | None = None,
        create_default: bool = True,
        framework: str | None = None,
        extensions: bool = False,
        num_workers: int = 1,
    ) -> None:
        self._collections: dict[str, Collection] = {}
        self._extra_meta: dict[str, Any] = {}
        self.num_workers = _num_workers(num_workers, "CollectionManager")
        self.framework = framework
        if create_default:
            if framework is None:
                defaults: dict[str, list[str]] = {
                    CollectionKeys.ALL: [],
                    CollectionKeys.DEFAULT: [],
                }
            else:
                defaults = builtin_collections(framework, extensions=extensions)
            for name, regexes in defaults.items():
                self._collections[name] = Collection(name, include_regex=regexes)
        if collections is not None:
            items = collections.values() if isinstance(collections, Mapping) else collections
            for coll in items:
                self.add(coll)

    # -- access -----------------------------------------------------------------------------

    @property
    def collections(self) -> dict[str, Collection]:
        """The live name -> Collection dict (insertion order = export order)."""
        return self._collections

    def get_collections(self) -> dict[str, Collection]:
        return self._collections

    def add(self, arg: Collection | str | Iterable[Collection | str]) -> Collection | None:
        """Add a Collection (replacing one of the same name) or create one by name (kept if it
        exists). Returns the collection when one was given."""
        if isinstance(arg, Collection):
            self._collections[arg.name] = arg
            return arg
        if isinstance(arg, str):
            return self.get(arg, create_if_not_exists=True)
        if isinstance(arg, Iterable):
            for item in arg:
                self.add(item)
            return None
        raise SMDebugValueError(f"add({arg!r}): expected a Collection, a name or a list of them")

    def create_collection(self, name: str, cls: type[Collection] = Collection) -> Collection:
        """The named collection, made as ``cls(name)`` when it does not exist yet."""
        coll = self._collections.get(name)
        if coll is None:
            coll = self._collections[name] = cls(name)
        return coll

    def get(self, name: str, create: bool | None = None, *,
            create_if_not_exists: bool = False) -> Collection:
        """The named collection. ``create`` (smdebug's keyword) or ``create_if_not_exists``
        makes a missing one; otherwise a missing name raises CollectionNotFound."""
        coll = self._collections.get(name)
        if coll is None:
            if not (create if create is not None else create_if_not_exists):
                raise CollectionNotFound(name, self._collections)
            coll = self._collections[name] = Collection(name)
        return coll

    def __getitem__(self, name: str) -> Collection:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, Collection):
            name = name.name
        return name in self._collections

    def __iter__(self) -> Iterator[Collection]:
        return iter(list(self._collections.values()))

    def __len__(self) -> int:
        return len(self._collections)

    # smdebug-compatible accessors
    def get_num_workers(self) -> int:
        return self.num_workers

    def set_num_workers(self, num_workers: int) -> None:
        self.num_workers = _num_workers(num_workers, "set_num_workers")

    def update_meta(self, meta: Mapping[str, Any]) -> None:
        """Merge keys into the file's ``_meta`` (``num_workers`` sets the worker count)."""
        if not isinstance(meta, Mapping):
            raise SMDebugTypeError(f"meta should be a dict, got {type(meta).__name__}: {meta!r}")
        extra = dict(meta)
        if "num_workers" in extra:
            self.num_workers = _num_workers(extra.pop("num_workers"), "update_meta")
        self._extra_meta.update(extra)

    # -- (de)serialisation ------------------------------------------------------------------

    def to_json_dict(self, num_workers: int | None = None) -> dict[str, Any]:
        n = self.num_workers if num_workers is None else _num_workers(num_workers, "to_json_dict")
        return {
            "collections": {name: c.to_json_dict() for name, c in self._collections.items()},
            "_meta": {**self._extra_meta, "num_workers": n},
        }

    def export(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        *,
        num_workers: int | None = None,
    ) -> str:
        """The collections-file text.

        ``export(out_dir, filename)`` (smdebug's form) writes it to
        ``<out_dir>/collections/000000000/<filename>``, locally or on S3; ``export(path)`` writes
        it atomically to the file ``path``.
        """
        text = json.dumps(self.to_json_dict(num_workers))
        path = out_dir
        if filename is not None:
            if path is None:
                raise SMDebugValueError(f"export(None, {filename!r}): an out_dir is required")
            from smdebug_lite.storage import open_storage

            storage = open_storage(os.fspath(path))
            storage.write_atomic(f"{COLLECTIONS_DIR}/{filename}", text.encode("utf-8"))
            return text
        if path is not None:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(tmp, target)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        return text

    @classmethod
    def from_dict(cls, params: Any, source: str = "<collections>",
                  collection_class: type[Collection] = Collection) -> CollectionManager:
        """Read a collections file's content. Save configs read here raise SMDebugValueError
        for a mode the file stores as null (as smdebug's do), instead of a default schedule."""
        if not isinstance(params, Mapping):
            raise SMDebugValueError(
                f"{source}: a collections file must hold a JSON object, got {type(params).__name__}"
            )
        if "collections" not in params:
            raise SMDebugValueError(f"{source}: the key 'collections' is missing")
        if "_meta" not in params:
            raise SMDebugValueError(f"{source}: the key '_meta' (with num_workers) is missing")
        colls = params["collections"]
        meta = params["_meta"]
        if not isinstance(colls, Mapping):
            raise SMDebugValueError(
                f"{source}: 'collections' must be an object of name -> collection"
            )
        if not isinstance(meta, Mapping) or "num_workers" not in meta:
            raise SMDebugValueError(
                f"{source}: '_meta' must be an object with 'num_workers', got {meta!r}"
            )
        cm = cls(
            create_default=False, num_workers=_num_workers(meta["num_workers"], f"{source}: _meta")
        )
        for key, cdict in colls.items():
            if not isinstance(cdict, Mapping):
                raise SMDebugValueError(
                    f"{source}: collection {key!r} must be an object, got {cdict!r}"
                )
            if "name" not in cdict:
                cdict = {**cdict, "name": key}
            elif cdict["name"] != key:
                raise SMDebugValueError(
                    f"{source}: collection stored under {key!r} is named {cdict['name']!r}"
                )
            try:
                coll = collection_class.from_dict(cdict)
            except SMDebugValueError as exc:
                raise SMDebugValueError(f"{source}: collection {key!r}: {exc}") from exc
            if coll.save_config is not None:
                coll.save_config.mark_read_from(f"{source}: collection {key!r}")
            cm.add(coll)
        cm.update_meta({k: v for k, v in meta.items() if k != "num_workers"})
        return cm

    @classmethod
    def load_from_string(cls, s: str | bytes, collection_class: type[Collection] = Collection,
                         source: str = "<string>") -> CollectionManager:
        try:
            params = json.loads(s)
        except UnicodeDecodeError as exc:
            raise SMDebugValueError(f"{source}: not UTF-8 text ({exc.reason})") from exc
        except json.JSONDecodeError as exc:
            raise SMDebugValueError(
                f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from exc
        return cls.from_dict(params, source, collection_class)

    @classmethod
    def load(cls, filename: str | os.PathLike[str],
             collection_class: type[Collection] = Collection) -> CollectionManager:
        with open(filename, "rb") as f:
            data = f.read()
        return cls.load_from_string(data, collection_class, source=os.fspath(filename))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionManager):
            return NotImplemented
        return self.collections == other.collections and self.num_workers == other.num_workers

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CollectionManager(collections={list(self._collections)!r}, "
            f"num_workers={self.num_workers})"
        )
