"""A trial's non-finite records (`smdebug_lite.format.non_finite`), read as they appear.

A worker writes its record once, so each file is read once: a poll lists ``non_finite/`` and
reads only the files not read yet. The trial decides when to poll (as often as it refreshes
its steps, and once more after training ended).
"""

from __future__ import annotations

from smdebug_lite.exceptions import NonFiniteRecordDamaged
from smdebug_lite.format.locations import NON_FINITE_DIR, parse_non_finite_file_name
from smdebug_lite.format.non_finite import NonFiniteRecord, decode_record
from smdebug_lite.storage import Storage


class NonFiniteRecords:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._by_worker: dict[str, NonFiniteRecord] = {}
        self._read: set[str] = set()
        self.polls = 0
        self.last_poll = float("-inf")  # time.monotonic() of the last poll
        self.final = False  # training ended before the last poll: nothing more will come

    def poll(self, now: float) -> None:
        """Read the records written since the last poll (NonFiniteRecordDamaged names a file
        that is not one; it is read again at the next poll)."""
        self.polls += 1
        self.last_poll = now
        keys = [k for k in self.storage.list(NON_FINITE_DIR)
                if k not in self._read and parse_non_finite_file_name(k) is not None]
        if not keys:
            return
        for key, data in zip(keys, self.storage.read_many(keys), strict=True):
            uri = self.storage.uri(key)
            record = decode_record(data, uri)
            named = parse_non_finite_file_name(key)
            if record.worker != named:
                raise NonFiniteRecordDamaged(
                    uri, f"it holds the record of worker {record.worker!r}, but its name is "
                    f"that of worker {named!r}")
            self._by_worker[record.worker] = record
            self._read.add(key)

    def records(self) -> list[NonFiniteRecord]:
        """One per worker that wrote one, earliest (step, worker) first."""
        return sorted(self._by_worker.values(), key=lambda r: (r.step, r.worker))
