"""Every record in the smdebug 1.0.34 golden out_dirs decodes with our low-level reader to the
values smdebug's own Trial API returned (sha256 of the C-order bytes, dtype, shape)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import GOLDEN_DIR

from smdebug_lite.format.crc import SMDEBUG_MAGIC_FOOTER
from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.records import decode_record, iter_records
from smdebug_lite.format.tensor_codec import decode_tensor_event
from smdebug_lite.storage import LocalStorage

GOLDEN = sorted(p.name for p in GOLDEN_DIR.iterdir() if (p / "index").is_dir())


def load_all(name: str) -> dict[tuple[str, int], np.ndarray]:
    storage = LocalStorage(str(GOLDEN_DIR / name))
    values = {}
    for rel in storage.list("index"):
        doc = parse_index(storage.read(rel), rel)
        event = storage.read(doc.event_file_name) if doc.tensors else b""
        for entry in doc.tensors:
            payload, end = decode_record(event, entry.start_idx)
            assert end - entry.start_idx == entry.length
            decoded = decode_tensor_event(payload)
            assert decoded.tag == entry.name
            assert decoded.step == doc.step
            assert (decoded.mode_value, decoded.mode_step) == (doc.mode.value, doc.mode_step)
            values[(entry.name, doc.step)] = decoded.value
    return values


@pytest.mark.parametrize("name", GOLDEN)
def test_every_expected_value_decodes_exactly(name):
    expected = json.loads((GOLDEN_DIR / "expected" / f"{name}.json").read_text())
    values = load_all(name)
    checked = 0
    for q in expected["queries"]:
        exp = q["expected"]
        if q["op"] != "t_value" or "__exception__" in exp or q.get("mode") not in (None, "GLOBAL"):
            continue
        arr = values[(q["name"], q["step"])]
        assert arr.dtype.str == exp["dtype"]
        assert list(arr.shape) == exp["shape"]
        assert hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest() == exp["sha256"]
        checked += 1
    for q in expected["queries"]:
        if q["op"] == "t_values" and "__exception__" not in q["expected"]:
            for step, digest in q["expected"].items():
                arr = values[(q["name"], int(step))]
                assert hashlib.sha256(arr.tobytes()).hexdigest() == digest
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", GOLDEN)
def test_event_files_use_smdebugs_constant_footer(name):
    storage = LocalStorage(str(GOLDEN_DIR / name))
    files = storage.list("events")
    assert files
    for rel in files:
        blob = storage.read(rel)
        for offset, payload in iter_records(blob):
            end = offset + 12 + len(payload)
            assert int.from_bytes(blob[end : end + 4], "little") == SMDEBUG_MAGIC_FOOTER
