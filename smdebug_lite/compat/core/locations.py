"""``smdebug.core.locations``: where a trial's files live and what an index entry points to.

File names come from ``smdebug_lite.format.locations`` (the one place our writers and readers
take them from); the classes here keep smdebug's API over it. Paths are joined with
``os.path.join`` as smdebug joined them, so a trial prefix may be a directory, an
``s3://bucket/prefix`` URI or empty (relative names).
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod

from smdebug_lite.format import locations as names
from smdebug_lite.log.logger import get_logger

logger = get_logger(__name__)

STEP_NUMBER_FORMATTING_LENGTH = "012"
_EVENT_FILE_RE = re.compile(r"^(\d+)_(.+)\.tfevents$")
_PREFIX_BEFORE_INDEX_RE = re.compile(r"(.+)/index/.+$")


class TensorLocation:
    """Where one saved tensor's record is: event file, byte offset and length."""

    def __init__(
        self,
        tname: str,
        mode: object,
        mode_step: int,
        event_file_name: str,
        start_idx: int,
        length: int,
        worker: str,
    ) -> None:
        self.tensorname = tname
        self.mode = mode
        self.mode_step = int(mode_step)
        self.event_file_name = event_file_name
        self.start_idx = start_idx
        self.length = length
        self.worker = worker

    def to_dict(self) -> dict:
        """The entry's ``tensor_payload`` item in an index file."""
        return {"tensorname": self.tensorname, "start_idx": self.start_idx, "length": self.length}

    def __repr__(self) -> str:
        return (
            f"TensorLocation({self.tensorname!r}, {self.event_file_name!r}, "
            f"start_idx={self.start_idx}, length={self.length})"
        )


class TensorShape:
    """A tensor saved by shape only (an index ``shape_payload`` item)."""

    def __init__(
        self,
        name: str,
        mode: object,
        mode_step: int | None,
        shape: tuple[int, ...],
        original_name: str | None = None,
    ) -> None:
        self.name = name
        self.original_name = original_name if original_name is not None else name
        self.mode = mode
        self.mode_step = mode_step
        self.shape = tuple(shape)

    def to_dict(self) -> dict:
        return {"tensorname": self.name, "originalname": self.original_name, "shape": self.shape}


class EventFileLocation(ABC):
    """An event file named ``<step, 12 digits>_<worker>.tfevents``."""

    def __init__(self, step_num: int, worker_name: str) -> None:
        self.step_num = int(step_num)
        self.worker_name = worker_name
        self.type: str | None = None

    def get_step_num_str(self) -> str:
        return names.step_dir_name(self.step_num)

    def get_filename(self) -> str:
        return f"{self.get_step_num_str()}_{self.worker_name}.tfevents"

    @classmethod
    def match_regex(cls, s: str) -> EventFileLocation | None:
        return cls.load_filename(s, print_error=False)

    @classmethod
    def load_filename(cls, s: str, print_error: bool = True) -> EventFileLocation | None:
        """The location an event file's name describes, or None (logged) for another name."""
        m = _EVENT_FILE_RE.search(os.path.basename(s))
        if m is None:
            if print_error:
                logger.error("%s is not an event file name (<step>_<worker>.tfevents expected)", s)
            return None
        return cls(step_num=int(m.group(1)), worker_name=m.group(2))

    @abstractmethod
    def get_file_location(self, *args: str) -> str: ...


class TensorFileLocation(EventFileLocation):
    """A step's event file under ``<trial>/events/<step>/``."""

    def __init__(self, step_num: int, worker_name: str) -> None:
        super().__init__(step_num, worker_name)
        self.type = names.EVENTS_DIR

    @staticmethod
    def get_dir(trial_dir: str) -> str:
        return os.path.join(trial_dir, names.EVENTS_DIR)

    def get_file_location(self, trial_dir: str = "") -> str:  # type: ignore[override]
        """The file's path under `trial_dir`, or relative to the trial when it is empty."""
        rel = names.event_file_name(self.step_num, self.worker_name)
        return os.path.join(trial_dir, rel) if trial_dir else rel

    @classmethod
    def get_step_dirs(cls, trial_dir: str) -> list[str]:
        """Names of the step directories under ``<trial>/events`` (local trials)."""
        base = cls.get_dir(trial_dir)
        if not os.path.isdir(base):
            return []
        return [d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))]

    @classmethod
    def get_step_dir_path(cls, trial_dir: str, step_num: int) -> str:
        return os.path.join(cls.get_dir(trial_dir), names.step_dir_name(int(step_num)))


class TensorboardFileLocation(EventFileLocation):
    """A TensorBoard event file under ``<base>/<MODE>/``."""

    def __init__(self, step_num: int, worker_name: str, mode: object = None) -> None:
        super().__init__(step_num, worker_name)
        self.mode = mode
        self.type = names.TENSORBOARD_DIR

    def get_file_location(self, base_dir: str = "") -> str:  # type: ignore[override]
        mode_name = getattr(self.mode, "name", None)
        if mode_name is None:
            raise ValueError(
                f"TensorboardFileLocation needs a mode (a ModeKeys), got {self.mode!r}"
            )
        prefix = (
            os.path.join(base_dir, mode_name)
            if base_dir
            else os.path.join(self.type or "", mode_name)
        )
        return os.path.join(prefix, self.get_filename())


class IndexFileLocationUtils:
    """Index files: ``<trial>/index/<step // 1000, 9 digits>/<step, 12 digits>_<worker>.json``."""

    MAX_INDEX_FILE_NUM_IN_INDEX_PREFIX = names.INDEX_GROUP_SIZE

    @staticmethod
    def get_index_prefix_for_step(step_num: int) -> str:
        return names.index_group(step_num)

    @staticmethod
    def next_index_prefix_for_step(step_num: int) -> str:
        """The directory after the one holding `step_num` (where listing for later steps starts)."""
        return names.index_group(step_num + names.INDEX_GROUP_SIZE)

    @staticmethod
    def _get_index_key(trial_prefix: str, step_num: int, worker_name: str) -> str:
        return os.path.join(trial_prefix, names.index_file_name(step_num, worker_name))

    @staticmethod
    def get_index_key_for_step(trial_prefix: str, step_num: int, worker_name: str) -> str:
        return IndexFileLocationUtils._get_index_key(trial_prefix, step_num, worker_name)

    @staticmethod
    def get_step_from_idx_filename(index_file_name: str) -> int:
        """The number between the first and second '_' of a name (smdebug's old layout,
        ``<anything>_<step>_<worker>``)."""
        first = index_file_name.find("_")
        rest = index_file_name[first + 1 :]
        second = rest.find("_")
        return int(rest[:second])

    @staticmethod
    def parse_step_from_index_file_name(index_file_name: str) -> int:
        """10 from ``prefix/index/000000000/000000000010_worker_0.json`` (or an event file)."""
        return int(os.path.basename(index_file_name).split("_")[0])

    @staticmethod
    def get_index_path(path: str) -> str:
        return os.path.join(path, names.INDEX_DIR)

    @staticmethod
    def get_prefix_from_index_file(index_file: str) -> str:
        """The trial prefix of an index file's path (what comes before ``/index/``)."""
        m = _PREFIX_BEFORE_INDEX_RE.match(index_file)
        if m is None:
            raise ValueError(f"{index_file!r} is not under an index/ directory")
        return m.group(1)
