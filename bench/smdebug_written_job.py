"""Writes a trial with real smdebug 1.0.34's own writer, for the read and rule benchmarks.

`build_smdebug_job` (called from smdebug-lite's venv) runs this file with the reference venv's
python (cwd outside the repo so smdebug is the real one) unless the trial is already there:

    /tmp/smdref/bin/python bench/smdebug_written_job.py OUT_DIR STEPS TENSORS [LAYOUT]

Each step is one `FileWriter` (one event file + one index file), and each tensor is saved the
way smdebug's hooks save a collection with a ReductionConfig and `save_raw_tensor=True`: its
reductions (mean, max, l2 norm) first, then the raw tensor. Layouts:

  plain  shapes and names match the trials `bench_trial.py` writes with smdebug-lite
         (`layer0.bias`, ...), so both kinds answer the same queries; no collections
  hook   what rules expect of a PyTorch hook's trial: the tensors are gradients
         (`gradient/layer0.bias`, ...) in the `gradients` collection, and a falling loss
         (`CrossEntropyLoss_output_0`, raw only) is saved in `losses`
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

LAYOUTS = ("plain", "hook")
LOSS = "CrossEntropyLoss_output_0"


def build_smdebug_job(ref: str, path: Path, steps: int, tensors: int,
                      layout: str = "plain") -> None:
    """The trial written at `path` by smdebug 1.0.34 with the reference python `ref`; kept
    while its stamp says it was written with the same size and layout."""
    import shutil

    stamp = path / ".bench_job"
    spec = f"smdebug {steps}x{tensors}" + ("" if layout == "plain" else f" {layout}")
    if stamp.exists() and stamp.read_text() == spec:
        return
    shutil.rmtree(path, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([ref, str(Path(__file__).resolve()), str(path), str(steps),
                           str(tensors), layout], capture_output=True, text=True, cwd="/tmp",
                          env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"smdebug could not write the trial:\n{proc.stderr[-3000:]}")
    stamp.write_text(spec)
    print(f"  smdebug 1.0.34 wrote {steps} steps x {tensors} tensors ({layout}) to {path} in "
          f"{proc.stdout.strip().splitlines()[-1]}s")


def main() -> None:
    out_dir, steps, tensors = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    layout = sys.argv[4] if len(sys.argv) > 4 else "plain"
    if layout not in LAYOUTS:
        sys.exit(f"layout {layout!r}: expected one of {LAYOUTS}")
    import numpy as np
    from smdebug.core.access_layer.utils import training_has_ended
    from smdebug.core.collection_manager import CollectionManager
    from smdebug.core.modes import ModeKeys
    from smdebug.core.reductions import get_reduction_tensor_name
    from smdebug.core.writer import FileWriter

    shapes = [(64,), (16, 8), (), (4, 4, 4), (10,)]
    rng = np.random.default_rng(0)
    base = [rng.standard_normal(shapes[i % len(shapes)]).astype(np.float32)
            for i in range(tensors)]
    names = [f"layer{i // 2}.{'weight' if i % 2 else 'bias'}" for i in range(tensors)]
    if layout == "hook":
        names = [f"gradient/{n}" for n in names]
    reductions = (("mean", lambda a: a.mean()), ("max", lambda a: a.max()),
                  ("l2", lambda a: np.linalg.norm(a.ravel())))
    red_names = {(n, r): get_reduction_tensor_name(n, r, False) for n in names
                 for r, _ in reductions}
    t0 = time.perf_counter()
    cm = CollectionManager()
    cm.set_num_workers(1)
    if layout == "hook":
        from smdebug.core.collection import Collection

        for collection, members in (("gradients", names), ("losses", [LOSS])):
            c = Collection(collection)
            for n in members:
                c.add_tensor_name(n)
            cm.add(c)
    cm.export(out_dir, "worker_0_collections.json")
    for s in range(steps):
        w = FileWriter(trial_dir=out_dir, step=s, worker="worker_0")
        for name, b in zip(names, base, strict=True):
            value = b + np.float32(s * 1e-3)
            for r, fn in reductions:
                w.write_tensor(tdata=np.asarray(fn(value), dtype=np.float32),
                               tname=red_names[(name, r)], mode=ModeKeys.TRAIN, mode_step=s)
            w.write_tensor(tdata=value, tname=name, mode=ModeKeys.TRAIN, mode_step=s)
        if layout == "hook":
            loss = np.float32(0.5 + 2.0 / (1.0 + s * 0.01))
            w.write_tensor(tdata=np.asarray(loss), tname=LOSS, mode=ModeKeys.TRAIN, mode_step=s)
        w.close()
    training_has_ended(out_dir)
    print(f"{time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
