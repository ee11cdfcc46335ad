"""Writes a trial with real smdebug 1.0.34's own writer, for the read benchmark.

Run it with the reference venv's python (cwd outside the repo so smdebug is the real one):

    /tmp/smdref/bin/python bench/smdebug_written_job.py OUT_DIR STEPS TENSORS

Each step is one `FileWriter` (one event file + one index file), and each tensor is saved the
way smdebug's hooks save a collection with a ReductionConfig and `save_raw_tensor=True`: its
reductions (mean, max, l2 norm) first, then the raw tensor. Shapes and names match the trials
`bench_trial.py` writes with smdebug-lite, so both kinds answer the same queries.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    out_dir, steps, tensors = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
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
    reductions = (("mean", lambda a: a.mean()), ("max", lambda a: a.max()),
                  ("l2", lambda a: np.linalg.norm(a.ravel())))
    red_names = {(n, r): get_reduction_tensor_name(n, r, False) for n in names
                 for r, _ in reductions}
    t0 = time.perf_counter()
    cm = CollectionManager()
    cm.set_num_workers(1)
    cm.export(out_dir, "worker_0_collections.json")
    for s in range(steps):
        w = FileWriter(trial_dir=out_dir, step=s, worker="worker_0")
        for name, b in zip(names, base, strict=True):
            value = b + np.float32(s * 1e-3)
            for r, fn in reductions:
                w.write_tensor(tdata=np.asarray(fn(value), dtype=np.float32),
                               tname=red_names[(name, r)], mode=ModeKeys.TRAIN, mode_step=s)
            w.write_tensor(tdata=value, tname=name, mode=ModeKeys.TRAIN, mode_step=s)
        w.close()
    training_has_ended(out_dir)
    print(f"{time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
