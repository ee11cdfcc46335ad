"""``smdebug.core.reader``: ``FileReader``, every tensor or scalar event of one event file.

`check` selects the CRC checks (``"minimal"``/True: length CRCs and smdebug's footer, ``"full"``:
payload CRCs as TensorBoard writes them, anything else: none); a failed check raises
``SMDebugRuntimeError`` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from smdebug_lite.compat.core.tfevent.event_file_reader import (
    EventFileReader,
    TensorTuple,
    get_tensor_data,
)
from smdebug_lite.exceptions import SMDebugNotImplementedError


class FileReader:
    """Reads the event file `fname` (a path or ``s3://`` URI), loaded whole at construction."""

    def __init__(self, fname: str, wtype: str = "tfevent") -> None:
        if wtype != "tfevent":
            raise SMDebugNotImplementedError(f"wtype={wtype!r}: only tfevent format is supported")
        self._reader = EventFileReader(fname=fname)

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.__exit__(*exc)

    def read_tensors(self, check: object = "minimal") -> Iterator[TensorTuple]:
        """(name, step, value, mode, mode step) of each tensor, in file order."""
        if check is True:
            check = "minimal"
        return self._reader.read_tensors(check=check)

    def read_events(
        self, check: object = "minimal", regex_list: list[str] | None = None
    ) -> list[dict]:
        """Each summary value (optionally only names matching one of `regex_list` anywhere) as
        ``{"timestamp", "step", "name", "value"}``. Tensors come back as arrays, scalar summaries
        (TensorBoard's ``simple_value``) as floats; other kinds (histograms) are left out."""
        if check is True or (isinstance(check, str) and check.lower() == "minimal"):
            check = "minimal"
        patterns = [re.compile(r) for r in regex_list] if regex_list is not None else None
        out = []
        for event in self._reader.read_events(check=check):
            for v in event.summary.value:
                if patterns is not None and not any(p.search(v.tag) for p in patterns):
                    continue
                kind = v.WhichOneof("value")
                if kind == "tensor":
                    value = get_tensor_data(v.tensor)
                elif kind == "simple_value":
                    value = v.simple_value
                else:
                    continue
                out.append(
                    {
                        "timestamp": event.wall_time,
                        "step": event.step,
                        "name": v.tag,
                        "value": value,
                    }
                )
        return out
