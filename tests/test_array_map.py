"""`ArrayMap` behaves as the dict it replaces for a manifest's steps."""

from __future__ import annotations

import numpy as np
import pytest

from smdebug_lite.trials.array_map import ArrayMap


def test_array_map_answers_like_a_dict():
    keys = np.array([0, 2, 5, 9], dtype=np.int64)
    m = ArrayMap(keys, lambda i: ("v", int(keys[i])))
    d = {k: ("v", k) for k in keys.tolist()}
    assert dict(m) == d and len(m) == 4 and list(m) == [0, 2, 5, 9]
    assert m[5] == ("v", 5) and m.get(np.int64(9)) == ("v", 9)
    for missing in (1, -1, 10, None, "2", 2.5):
        assert missing not in m and m.get(missing) is None
    with pytest.raises(KeyError):
        m[3]
    assert m.setdefault(12, ("w", 12)) == ("w", 12) and m.setdefault(2, "x") == ("v", 2)
    m[0] = "override"  # an added key shadows the arrays' one, counted once
    assert list(m) == [0, 2, 5, 9, 12] and len(m) == 5 and m[0] == "override"
    assert m.positions(np.array([9, 3, 0, 100])).tolist() == [3, -1, 0, -1]
    del m[12]
    assert len(m) == 4 and 12 not in m
    assert ArrayMap(np.zeros(0, dtype=np.int64), str).positions(np.array([1])).tolist() == [-1]
