"""Builds out_dirs for trial tests with the real writer (smdebug_lite.writer.ThreadTrialWriter)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from smdebug_lite.config import CollectionManager
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer import ThreadTrialWriter as TrialWriter

TensorsAt = Callable[[int], dict[str, np.ndarray]]


def collections_text(num_workers: int = 1) -> str:
    return json_text(CollectionManager(framework="pytorch", num_workers=num_workers))


def json_text(cm: CollectionManager) -> str:
    return cm.export()


def open_writer(out_dir: str, worker: str = "worker_0", num_workers: int = 1) -> TrialWriter:
    w = TrialWriter(out_dir, worker)
    w.write_collections(collections_text(num_workers))
    return w


def write_steps(w: TrialWriter, steps: Iterable[int], tensors_at: TensorsAt,
                mode: ModeKeys = ModeKeys.TRAIN, mode_step: Callable[[int], int] = lambda s: s,
                shapes_at: Callable[[int], dict[str, tuple]] | None = None) -> None:
    for s in steps:
        sw = w.new_step(s, mode, mode_step(s))
        for name, value in tensors_at(s).items():
            sw.add_tensor(name, value)
        for name, shape in (shapes_at(s) if shapes_at else {}).items():
            sw.add_shape(name, shape)
        w.submit(sw)
    w.flush()


def simple_tensors(s: int) -> dict[str, np.ndarray]:
    """Deterministic small tensors whose values encode the step."""
    return {
        "w": (np.arange(12, dtype=np.float32).reshape(4, 3) + s),
        "b": np.full(3, s, dtype=np.float64),
        "loss": np.array(1.0 / (s + 1), dtype=np.float32),
    }


def write_job(out_dir: str, steps: Iterable[int] = range(5), tensors_at: TensorsAt = simple_tensors,
              close: bool = True, worker: str = "worker_0", num_workers: int = 1) -> TrialWriter:
    w = open_writer(out_dir, worker, num_workers)
    write_steps(w, steps, tensors_at)
    if close:
        w.close()
    return w
