"""`ValueFetcher`: tensor values for `Tensor`, waiting for event files that are not there yet.

An index file names its event file, which a writer may still be uploading (S3) or moving into
place. `ValueReader` only reads; this layer decides, from the trial's `StepTable` and settings,
whether a missing file is worth waiting for (bounded) or can never come (`EventFileMissing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from smdebug_lite.exceptions import EventFileMissing, TrialDataTimeout
from smdebug_lite.index import Entry, StepIndex, gc_paused
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage
from smdebug_lite.trials.read_ahead import ahead_settings
from smdebug_lite.trials.settings import TrialSettings
from smdebug_lite.trials.step_table import StepTable
from smdebug_lite.trials.value_reader import NoRawValue, ValueReader

logger = get_logger(__name__)


class ValueFetcher:
    def __init__(self, reader: ValueReader, table: StepTable, settings: TrialSettings,
                 storage: Storage, training_ended: Callable[[], bool]) -> None:
        self.reader = reader
        self._table = table
        self._settings = settings
        self._storage = storage
        self._training_ended = training_ended
        # One value as stored; FileNotFoundError when its event file is not there (yet): the
        # caller then calls `wait_for`. (`one` does both; the per-value paths call these two
        # to save a call.)
        self.read = reader.read
        # (steps, bytes) a tensor read step by step fetches ahead (`read_ahead`).
        self.ahead = ahead_settings()

    def one(self, si: StepIndex, entry: Entry, tname: str) -> np.ndarray:
        """One value; waits (bounded by the retry limit and the trial's timeout) for an event
        file the index points to but which is not there yet, unless it can never come."""
        try:
            return self.read(si, entry)
        except FileNotFoundError:
            return self.wait_for(si, entry, tname)

    def wait_for(self, si: StepIndex, entry: Entry, tname: str) -> np.ndarray:
        """`one` after its first read found no event file."""
        settings, storage = self._settings, self._storage
        attempts = 1
        started = time.monotonic()
        while True:
            uri = storage.uri(si.event_rel or "")
            gone = (
                attempts > settings.missing_event_file_retries
                or self._table.last_step_of(si.worker) > si.step
                or self._training_ended()
            )
            if gone:
                raise EventFileMissing(uri, si.step, tname,
                                       storage.uri(si.key) if si.key else "") from None
            waited = settings.waited_too_long(started)
            if waited is not None:
                raise TrialDataTimeout(
                    storage.root, waited, f"event file {si.event_rel} of step {si.step} (listed "
                    f"in {si.key or 'its index file'}; needed for tensor {tname})")
            logger.debug("Event file %s not there yet; retrying", uri)
            settings.pause(started)
            try:
                return self.read(si, entry)
            except FileNotFoundError:
                attempts += 1

    def prefetch(self, sis: Sequence[StepIndex], name: str, one_worker: bool) -> None:
        """Read the raw values of `name` from `sis` into the reader's cache in one batch, for
        reads about to come (`read_ahead`). Nothing is raised: a missing file, a damaged
        record or entry is met by the read that needs it, as it would have been without
        this."""
        try:
            with gc_paused():
                self.reader.read_named(sis, name, one_worker)
        except Exception as e:  # noqa: BLE001 - left for the reads themselves (see above)
            logger.debug("Reading %s ahead stopped: %s", name, e)

    def prefetch_reductions(self, sis: Sequence[StepIndex]) -> None:
        """`prefetch` for saved reductions: each file's reduction records, in one batch."""
        try:
            self.reader.read_reductions(sis)
        except Exception as e:  # noqa: BLE001 - left for the reads themselves (`prefetch`)
            logger.debug("Reading reductions ahead stopped: %s", e)

    def many(self, sis: Sequence[StepIndex], tname: str,
             one_worker: bool = False) -> list[np.ndarray]:
        """Raw values of `tname` from many index files (NoRawValue names one without)."""
        try:
            return self.reader.read_named(sis, tname, one_worker)
        except FileNotFoundError:  # redo one by one, waiting for or reporting the missing file
            out: list[np.ndarray] = []
            for si in sis:
                entry = si.entries.get(tname)
                if entry is None:
                    raise NoRawValue(len(out)) from None
                out.append(self.one(si, entry, tname))
            return out
