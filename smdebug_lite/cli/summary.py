"""``smdebug-lite summary TRIAL``: what a trial holds, at a glance."""

from __future__ import annotations

from typing import Any

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import handled
from smdebug_lite.cli.options import DEFAULT_TIMEOUT, Json, Quiet, Timeout, Trial
from smdebug_lite.cli.trials import disk_size, human_bytes, open_trial

END_OF_JOB_FILE = "training_job_end.ts"


def trial_summary(trial: Any, uri: str) -> dict[str, Any]:
    names = trial.tensor_names()
    steps = trial.steps()
    collections = {
        name: sum(1 for n in names if coll.matches(n))
        for name, coll in sorted(trial.collections().items())
    }
    return {
        "trial": uri,
        "steps": len(steps),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "steps_per_mode": {m.name: len(trial.steps(mode=m)) for m in trial.modes()},
        "workers": trial.workers(),
        "tensors": len(names),
        "collections": collections,
        "training_ended": bool(trial.loaded_all_steps or trial.storage.exists(END_OF_JOB_FILE)),
        "size_bytes": disk_size(uri),
    }


def summary(trial: Trial, json: Json = False, quiet: Quiet = False,
            timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """Steps per mode, workers, collections with tensor counts, first/last step, whether
    training ended, size on disk.

    Examples:

        smdebug-lite summary ./my-trial

        smdebug-lite summary s3://bucket/jobs/run1/debug-output --json
    """
    with handled():
        data = trial_summary(open_trial(trial, timeout, quiet or json), trial)
    if json:
        console.print_json(data)
        return
    rows = [
        ["trial", data["trial"]],
        ["steps", f"{data['steps']} (first {data['first_step']}, last {data['last_step']})"],
        ["steps per mode", ", ".join(f"{m}: {n}" for m, n in data["steps_per_mode"].items())
         or "none"],
        ["workers", ", ".join(data["workers"]) or "none"],
        ["tensors", data["tensors"]],
        ["training ended", "yes" if data["training_ended"] else "no (still being written?)"],
        ["size on disk", human_bytes(data["size_bytes"])],
    ]
    console.table(None, ["", ""], rows)
    console.table("collections", ["collection", "tensors"],
                  [[k, v] for k, v in data["collections"].items()])
