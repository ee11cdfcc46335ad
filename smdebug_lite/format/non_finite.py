"""The non-finite provenance record: where one worker first met a NaN or an infinity.

Saved tensors tell that a value went bad at some saved step; the record tells where it
started: the step, the phase of the step (forward, loss, backward, weights), the module and
the tensor, with counts of NaN, +Inf and -Inf. A worker writes one record, at the first
non-finite value it meets, to ``non_finite/<worker>.json`` (`locations.non_finite_file_name`),
a directory smdebug 1.0.34 never lists. The document is one JSON object::

    {"version": 1, "step": 12, "mode": "TRAIN", "mode_step": 12, "worker": "worker_0",
     "phase": "backward", "module": "encoder.layers.1.linear2",
     "tensor": "encoder.layers.1.linear2.weight", "nan": 3, "posinf": 0, "neginf": 0,
     "wall_time": 1767225600.25}

Readers refuse a document of a later version or one whose fields are missing, of the wrong
type or out of range (`NonFiniteRecordDamaged`, naming the file and the field); keys they do
not know are ignored, so later versions may add some.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from smdebug_lite.exceptions import JSONFileRejected, NonFiniteRecordDamaged
from smdebug_lite.format import bounded_json
from smdebug_lite.modes import ALLOWED_MODE_NAMES, ModeKeys

VERSION = 1
PHASES = ("forward", "loss", "backward", "weights")
MAX_RECORD_BYTES = 64 * 1024  # a record is a few hundred bytes; anything this large is not one
_MAX_DEPTH = 4


@dataclass(frozen=True)
class NonFiniteRecord:
    """Where a worker first met a non-finite value. `module` is the module's path in the model
    (``""`` for the model itself); `tensor` the tensor's name; `wall_time` epoch seconds."""

    step: int
    mode: str
    mode_step: int
    worker: str
    phase: str
    module: str
    tensor: str
    nan: int
    posinf: int
    neginf: int
    wall_time: float

    def __post_init__(self) -> None:
        problem = _problem(asdict(self))
        if problem is not None:
            raise ValueError(f"NonFiniteRecord: {problem}")

    @property
    def mode_key(self) -> ModeKeys:
        return ModeKeys[self.mode]

    def describe(self) -> str:
        """One line for people: step, phase, module, tensor and counts."""
        where = f" in {self.module}" if self.module else ""
        return (f"step {self.step} ({self.mode} step {self.mode_step}), {self.worker}: "
                f"{self.phase}{where}, tensor {self.tensor} "
                f"({self.nan} NaN, {self.posinf} +Inf, {self.neginf} -Inf)")

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, **asdict(self)}


_INT_FIELDS = ("step", "mode_step", "nan", "posinf", "neginf")
_TEXT_FIELDS = ("mode", "worker", "phase", "module", "tensor")


def _problem(doc: dict[str, Any]) -> str | None:
    """What is wrong with a record's fields, or None."""
    for key in NonFiniteRecord.__dataclass_fields__:
        if key not in doc:
            return f"the field {key!r} is missing"
    for key in _INT_FIELDS:
        v = doc.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{key}={v!r}: expected an integer >= 0"
    for key in _TEXT_FIELDS:
        if not isinstance(doc.get(key), str):
            return f"{key}={doc.get(key)!r}: expected a string"
    for key in ("worker", "tensor"):
        if not doc[key]:
            return f"{key} is empty"
    if doc["mode"] not in ALLOWED_MODE_NAMES:
        return f"mode={doc['mode']!r}: expected one of {', '.join(ALLOWED_MODE_NAMES)}"
    if doc["phase"] not in PHASES:
        return f"phase={doc['phase']!r}: expected one of {', '.join(PHASES)}"
    if doc["nan"] + doc["posinf"] + doc["neginf"] == 0:
        return "nan, posinf and neginf are all 0: a record counts at least one non-finite value"
    t = doc.get("wall_time")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        return f"wall_time={t!r}: expected a finite number of seconds >= 0"
    return None


def encode_record(record: NonFiniteRecord) -> bytes:
    return (json.dumps(record.to_dict(), indent=1) + "\n").encode("utf-8")


def decode_record(data: bytes, source: str) -> NonFiniteRecord:
    """The record in `data`, read from `source` (a path or URI, for messages);
    NonFiniteRecordDamaged names it and what is wrong."""
    try:
        doc = bounded_json.loads(data, source, max_bytes=MAX_RECORD_BYTES, max_depth=_MAX_DEPTH)
    except JSONFileRejected as e:
        raise NonFiniteRecordDamaged(source, e.reason) from None
    if not isinstance(doc, dict):
        raise NonFiniteRecordDamaged(source, f"expected a JSON object, got {type(doc).__name__}")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise NonFiniteRecordDamaged(source, f"version={version!r}: expected an integer >= 1")
    if version > VERSION:
        raise NonFiniteRecordDamaged(
            source, f"version {version} is newer than this reader's ({VERSION}); upgrade "
            "smdebug-lite to read it")
    problem = _problem(doc)
    if problem is not None:
        raise NonFiniteRecordDamaged(source, problem)
    fields = {k: doc[k] for k in NonFiniteRecord.__dataclass_fields__}
    fields["wall_time"] = float(fields["wall_time"])
    return NonFiniteRecord(**fields)
