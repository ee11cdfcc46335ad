"""``smdebug.core.index_reader``: smdebug's index readers, for code that drives them directly.

Trials do not use these (``smdebug_lite.index.IndexReader`` reads index files incrementally for
them; it is a different class with a different API). These keep smdebug's: list index files
from a key, read the new ones, turn them into ``{tensor: {step: {worker: {"tensor_location" |
"tensor_shape": ...}}}}`` and fetch one value by its location. Index files are parsed by
``smdebug_lite.format.index_file`` (errors name the file) and records decoded by
``tensor_codec``.
"""

from __future__ import annotations

import os
import re
import time
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Iterator

import numpy as np

from smdebug_lite.compat.core.access_layer.s3handler import ReadObjectRequest, S3Handler
from smdebug_lite.compat.core.access_layer.utils import has_training_ended
from smdebug_lite.compat.core.locations import IndexFileLocationUtils, TensorLocation, TensorShape
from smdebug_lite.compat.core.s3_utils import list_s3_objects
from smdebug_lite.compat.core.tfrecord.tensor_reader import TensorReader
from smdebug_lite.compat.core.utils import is_s3, step_in_range
from smdebug_lite.config.env_settings import env_int
from smdebug_lite.exceptions import (
    IndexReaderException,
    SMDebugValueError,
    TensorUnavailableForStep,
)
from smdebug_lite.format import locations as names
from smdebug_lite.format.index_file import parse_index
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage.local_reads import read_local
from smdebug_lite.trials.settings import TrialSettings

MISSING_EVENT_FILE_RETRY_LIMIT_KEY = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
MISSING_EVENT_FILE_RETRY_LIMIT = 100
_INDEX_FILE_RE = re.compile(r"(.+)\.(json|csv)$")
_EVENT_FILE_RE = re.compile(r"(.+)\.(tfevents)$")

TensorData = dict[str, dict[int, dict[str, dict[str, object]]]]


def _worker_of(key: str) -> str | None:
    parsed = names.parse_index_file_name(key) or names.parse_event_file_name(key)
    return None if parsed is None else parsed[1]


class ReadIndexFilesCache:
    """Names of index files already read, so a listing that returns them again skips them.

    Past `cache_limit` (a soft limit) names sorting before the current start-after key are
    forgotten: listings start after that key, so those names cannot come back."""

    def __init__(self) -> None:
        self.lookup_set: set[str] = set()
        self.cache_limit = 1000

    def has_not_read(self, index_file: str) -> bool:
        return index_file not in self.lookup_set

    def _evict_cache(self, start_after_key: str | None) -> None:
        read_files = sorted(self.lookup_set)
        cut = bisect_left(read_files, start_after_key or "")
        self.lookup_set.difference_update(read_files[:cut])

    def add(self, index_file: str, start_after_key: str | None) -> None:
        if len(self.lookup_set) > self.cache_limit:
            self._evict_cache(start_after_key)
        self.lookup_set.add(index_file)


class IndexReader(ABC):
    """Reads the index files of the trial at `path` (subclasses: local, S3)."""

    def __init__(self, path: str) -> None:
        self.event_file_retry_limit = env_int(
            MISSING_EVENT_FILE_RETRY_LIMIT_KEY, MISSING_EVENT_FILE_RETRY_LIMIT, strict=True
        )
        self.path = path
        self.logger = get_logger(__name__)
        self.index_file_cache = ReadIndexFilesCache()

    @abstractmethod
    def fetch_tensor_value(self, tensor_location: TensorLocation) -> np.ndarray: ...

    @abstractmethod
    def list_event_files(self, start_after_key: str | None = None) -> list[str]: ...

    @abstractmethod
    def read_index_files(
        self, start_after_key: str | None, range_steps: tuple | None = None
    ) -> tuple[list[bytes], list[int], str | None, list[str]]: ...

    @abstractmethod
    def _is_event_file_present(self, file_name: str) -> bool: ...

    def load_tensor_data_from_index_files(
        self, start_after_key: str | None = None, range_steps: tuple | None = None
    ) -> tuple[TensorData, str | None]:
        """(tensor -> step -> worker -> location/shape, the key to start the next read after)."""
        responses, steps, last_index_token, workers = self.read_index_files(
            start_after_key, range_steps
        )
        tensor_data: TensorData = {}
        for step, response, worker in zip(steps, responses, workers, strict=True):
            tensor_data = self._update_tensors_from_json(
                tensor_data, step, response, self.path, worker
            )
        return tensor_data, last_index_token

    def _unread(
        self, index_files: list[str], start_after_key: str | None, range_steps: tuple | None
    ) -> Iterator[tuple[str, int, str]]:
        """(file, step, worker) of each index file not read before whose step is in range.

        A file counts as read once the caller's loop body for it has finished: if reading it
        raises, the next call offers it again."""
        for index_file in index_files:
            parsed = names.parse_index_file_name(index_file)
            if parsed is None or not self.index_file_cache.has_not_read(index_file):
                continue
            step, worker = parsed
            if range_steps is None or step_in_range(range_steps, step):
                yield index_file, step, worker
                self.index_file_cache.add(index_file, start_after_key)

    def _await_event_file(self, tensor_location: TensorLocation) -> None:
        if not self._is_event_file_present(tensor_location.event_file_name):
            self.event_file_present_loop(tensor_location)

    def _unavailable(self, loc: TensorLocation) -> TensorUnavailableForStep:
        return TensorUnavailableForStep(tname=loc.tensorname, step=loc.mode_step, mode=loc.mode)

    def event_file_present_loop(self, tensor_location: TensorLocation) -> None:
        """Wait for an event file an index points to; raise TensorUnavailableForStep once it
        cannot come (training ended, or its worker wrote a later step) or after
        $SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT looks."""
        name = tensor_location.event_file_name
        poll = TrialSettings.from_env(is_local=not is_s3(self.path)[0]).poll_interval_s
        for _ in range(self.event_file_retry_limit):
            if self._is_event_file_present(name):
                return
            if self._has_event_file_been_skipped(name) or has_training_ended(self.path):
                self.logger.warning("Event file %s was indexed but is missing", name)
                raise self._unavailable(tensor_location)
            time.sleep(poll)
        if self._is_event_file_present(name):
            return
        self.logger.warning(
            "Event file %s was indexed but not found after %d looks",
            name,
            self.event_file_retry_limit,
        )
        raise self._unavailable(tensor_location)

    def _has_event_file_been_skipped(self, missing_event_file_name: str) -> bool:
        """True when the missing file's worker has written an event file of another step after
        it: the missing one will not come any more."""
        missing_worker = _worker_of(missing_event_file_name)
        missing_step = IndexFileLocationUtils.parse_step_from_index_file_name(
            missing_event_file_name
        )
        for event_file in self.list_event_files(missing_event_file_name):
            if _worker_of(event_file) != missing_worker:
                continue
            step = IndexFileLocationUtils.parse_step_from_index_file_name(event_file)
            if step == missing_step:
                return False  # it appeared meanwhile
            self.logger.warning(
                "Event file %s is missing but %s exists; skipping it",
                missing_event_file_name,
                event_file,
            )
            return True
        return False

    @staticmethod
    def _validate(index_dict: dict) -> None:
        if "meta" not in index_dict:
            raise IndexReaderException("meta section is not present")
        if len(index_dict["meta"]) == 0:
            raise IndexReaderException("meta section is empty")
        if "tensor_payload" not in index_dict and "shape_payload" not in index_dict:
            raise IndexReaderException(
                "neither tensor_payload nor shape_payload sections are present"
            )

    def _update_tensors_from_json(
        self,
        index_tensors_dict: TensorData,
        step: int,
        response: bytes | str,
        path: str,
        worker: str,
    ) -> TensorData:
        """Add one index file's entries (of `step`, `worker`) to `index_tensors_dict`."""
        key = names.index_file_name(step, names.serialize_worker(worker))
        doc = parse_index(response, key)
        event_rel = doc.event_file_name or names.event_file_name(
            step, names.serialize_worker(worker)
        )
        event_file = os.path.join(path, event_rel)
        found: list[tuple[str, dict]] = [
            (
                t.name,
                {
                    "tensor_location": TensorLocation(
                        t.name, doc.mode, doc.mode_step, event_file, t.start_idx, t.length, worker
                    )
                },
            )
            for t in doc.tensors
        ]
        found += [
            (
                s.name,
                {
                    "tensor_shape": TensorShape(
                        s.name, doc.mode, doc.mode_step, s.shape, s.original_name
                    )
                },
            )
            for s in doc.shapes
        ]
        for name, obj in found:
            index_tensors_dict.setdefault(name, {}).setdefault(step, {})[worker] = obj
        return index_tensors_dict

    @staticmethod
    def _value_of_record(data: bytes | None, loc: TensorLocation) -> np.ndarray:
        if data is None:
            raise TensorUnavailableForStep(tname=loc.tensorname, step=loc.mode_step, mode=loc.mode)
        tensors = list(TensorReader(data).read_tensors())
        if not tensors:
            raise IndexReaderException(f"{loc.event_file_name}: no tensor at byte {loc.start_idx}")
        return tensors[0][2]


class S3IndexReader(IndexReader):
    """Index files under ``s3://bucket/prefix/index/``."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        on_s3, bucket, prefix = is_s3(path)
        if not on_s3:
            raise SMDebugValueError(f"path={path!r}: S3IndexReader needs s3://bucket/prefix")
        self.bucket_name = str(bucket)
        self.prefix_name = str(prefix)

    def _is_event_file_present(self, file: str) -> bool:
        from smdebug_lite.storage.s3 import S3Storage

        _, bucket, key = is_s3(file)
        return S3Storage(f"s3://{bucket}").exists(str(key))

    def fetch_tensor_value(self, tensor_location: TensorLocation) -> np.ndarray:
        self._await_event_file(tensor_location)
        request = ReadObjectRequest(
            tensor_location.event_file_name,
            int(tensor_location.start_idx),
            int(tensor_location.length),
        )
        return self._value_of_record(S3Handler.get_objects([request])[0], tensor_location)

    def read_index_files(
        self, start_after_key: str | None, range_steps: tuple | None = None
    ) -> tuple[list[bytes], list[int], str | None, list[str]]:
        """(contents, steps, the last key listed, workers) of index files not read before."""
        requests, steps, workers = [], [], []
        index_files, start_after_key = self.list_index_files(start_after_key)
        for index_file, step, worker in self._unread(index_files, start_after_key, range_steps):
            steps.append(step)
            workers.append(worker)
            requests.append(ReadObjectRequest(f"s3://{self.bucket_name}/{index_file}"))
        responses = S3Handler.get_objects(requests)
        missing = [r.key for r, data in zip(requests, responses, strict=True) if data is None]
        if missing:
            raise IndexReaderException(f"could not read index files {missing} of {self.path}")
        return responses, steps, start_after_key, workers  # type: ignore[return-value]

    def list_index_files(self, start_after_key: str | None = None) -> tuple[list[str], str | None]:
        return list_s3_objects(
            self.bucket_name,
            IndexFileLocationUtils.get_index_path(self.prefix_name),
            start_after_key,
        )

    def list_event_files(self, start_after_key: str | None = None) -> list[str]:
        keys, _ = list_s3_objects(
            self.bucket_name, os.path.join(self.prefix_name, names.EVENTS_DIR, ""), start_after_key
        )
        return keys


class LocalIndexReader(IndexReader):
    """Index files under ``<path>/index/``."""

    def _is_event_file_present(self, file: str) -> bool:
        return os.path.exists(file)

    @staticmethod
    def _files_under(directory: str, pattern: re.Pattern) -> list[str]:
        return sorted(
            os.path.join(root, f)
            for root, _, files in os.walk(directory)
            for f in files
            if pattern.match(f)
        )

    def list_index_files(self) -> list[str]:
        """Sorted paths of the trial's index files (``*.json``, ``*.csv``)."""
        return self._files_under(IndexFileLocationUtils.get_index_path(self.path), _INDEX_FILE_RE)

    def list_event_files(self, start_after_key: str | None = None) -> list[str]:
        event_files = self._files_under(os.path.join(self.path, names.EVENTS_DIR), _EVENT_FILE_RE)
        if start_after_key is None:
            return event_files
        return event_files[bisect_left(event_files, start_after_key) :]

    def fetch_tensor_value(self, tensor_location: TensorLocation) -> np.ndarray:
        self._await_event_file(tensor_location)
        data = read_local(
            tensor_location.event_file_name,
            int(tensor_location.start_idx),
            int(tensor_location.length),
        )
        return self._value_of_record(data, tensor_location)

    def read_index_files(
        self, start_after_key: str | None, range_steps: tuple | None = None
    ) -> tuple[list[bytes], list[int], str | None, list[str]]:
        """(contents, steps, the last file listed, workers) of index files not read before."""
        index_files = self.list_index_files()
        if start_after_key is not None:
            index_files = index_files[bisect_left(index_files, start_after_key) :]
        responses, steps, workers = [], [], []
        for index_file, step, worker in self._unread(index_files, start_after_key, range_steps):
            steps.append(step)
            workers.append(worker)
            responses.append(read_local(index_file))
        if index_files:
            start_after_key = index_files[-1]
        return responses, steps, start_after_key, workers
