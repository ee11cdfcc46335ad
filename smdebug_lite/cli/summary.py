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
        **first_non_finite(trial),
    }


def first_non_finite(trial: Any) -> dict[str, Any]:
    """The earliest non-finite record as a dict (None: no worker wrote one); a damaged record
    is reported beside it rather than failing the whole summary."""
    from smdebug_lite.exceptions import NonFiniteRecordDamaged

    try:
        record = trial.first_non_finite()
    except NonFiniteRecordDamaged as e:
        return {"first_non_finite": None, "non_finite_error": str(e)}
    return {"first_non_finite": None if record is None else record.to_dict()}


def non_finite_text(data: dict[str, Any]) -> str:
    if data.get("non_finite_error"):
        return f"unreadable: {data['non_finite_error']}"
    found = data["first_non_finite"]
    if found is None:
        return "none recorded"
    from smdebug_lite.format.non_finite import NonFiniteRecord

    fields = {k: v for k, v in found.items() if k != "version"}
    return NonFiniteRecord(**fields).describe()


def summary(trial: Trial, json: Json = False, quiet: Quiet = False,
            timeout: Timeout = DEFAULT_TIMEOUT) -> None:
    """Steps per mode, workers, collections with tensor counts, first/last step, whether
    training ended, size on disk, and where a NaN or Inf first appeared when a worker
    recorded it (non_finite/).

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
        ["first NaN/Inf", non_finite_text(data)],
        ["size on disk", human_bytes(data["size_bytes"])],
    ]
    console.table(None, ["", ""], rows)
    console.table("collections", ["collection", "tensors"],
                  [[k, v] for k, v in data["collections"].items()])
