"""Writing a worker's non-finite record (`smdebug_lite.format.non_finite`) into its out_dir."""

from __future__ import annotations

from smdebug_lite.format.locations import non_finite_file_name
from smdebug_lite.format.non_finite import NonFiniteRecord, encode_record
from smdebug_lite.storage import Storage, open_storage


def write_non_finite_record(storage: Storage | str, record: NonFiniteRecord) -> bool:
    """Write `record` as its worker's record, atomically (readers see all of it or nothing);
    False, writing nothing, when the worker has one already: the first non-finite value is the
    one that tells where things went wrong. `storage` is the out_dir's, or its path or URI.

    Each worker writes only its own file, so checking and writing need no lock between workers.
    """
    if not isinstance(record, NonFiniteRecord):
        raise TypeError(f"record={record!r}: expected a NonFiniteRecord")
    store = open_storage(storage) if isinstance(storage, str) else storage
    key = non_finite_file_name(record.worker)
    if store.exists(key):
        return False
    store.write_atomic(key, encode_record(record))
    return True
