"""`ArrayMap`: an int-keyed mapping whose bulk lives in sorted numpy arrays.

The step table maps global steps to (mode, mode step) and each mode's steps back to global
steps. For the steps of a manifest (100,000 and more) a dict costs about 150 bytes per step in
Python objects; these arrays cost 17. Keys added later (index files read one by one) go to a
plain dict beside them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import numpy as np


class ArrayMap(MutableMapping):
    """`keys` (sorted, unique int64) -> `value_at(i)`, plus a dict of keys added later."""

    __slots__ = ("keys_array", "_value_at", "_extra", "_new")

    def __init__(self, keys: np.ndarray, value_at: Callable[[int], Any]) -> None:
        self.keys_array = keys
        self._value_at = value_at
        self._extra: dict[int, Any] = {}
        self._new = 0  # keys of `_extra` not in the arrays

    def position(self, key: object) -> int:
        """Index of `key` in `keys_array`, or -1."""
        try:
            k = operator.index(key)  # type: ignore[arg-type]
        except TypeError:
            return -1
        keys = self.keys_array
        if not len(keys) or k < keys[0] or k > keys[-1]:
            return -1
        i = int(np.searchsorted(keys, k))
        return i if keys[i] == k else -1

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """`position` of each of `keys` (an int64 array), vectorised."""
        arr = self.keys_array
        if not len(arr):
            return np.full(len(keys), -1, dtype=np.int64)
        i = np.minimum(np.searchsorted(arr, keys), len(arr) - 1)
        return np.where(arr[i] == keys, i, -1)

    def __getitem__(self, key: object) -> Any:
        if self._extra:
            found = self._extra.get(key, self)  # type: ignore[call-overload]
            if found is not self:
                return found
        i = self.position(key)
        if i < 0:
            raise KeyError(key)
        return self._value_at(i)

    def __contains__(self, key: object) -> bool:
        return (bool(self._extra) and key in self._extra) or self.position(key) >= 0

    def __setitem__(self, key: int, value: Any) -> None:
        if key not in self._extra and self.position(key) < 0:
            self._new += 1
        self._extra[key] = value

    def __delitem__(self, key: int) -> None:
        del self._extra[key]  # the arrays are fixed
        if self.position(key) < 0:
            self._new -= 1

    def __iter__(self) -> Iterator[int]:
        yield from self.keys_array.tolist()
        if self._new == len(self._extra):
            yield from self._extra
        else:
            yield from (k for k in self._extra if self.position(k) < 0)

    def __len__(self) -> int:
        return len(self.keys_array) + self._new

    @property
    def extra(self) -> dict[int, Any]:
        """Keys added after the arrays (read it, do not change it)."""
        return self._extra
