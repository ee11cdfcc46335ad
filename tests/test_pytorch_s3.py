"""PyTorch hook with an s3:// out_dir, against moto's real HTTP server."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from _pytorch_support import MLP, Recorder, train_loop

import smdebug_lite.pytorch as smd

torch.set_num_threads(1)


def test_s3_out_dir_round_trip(s3_endpoint, s3_bucket):
    uri = f"s3://{s3_bucket}/jobs/run1"
    hook = smd.Hook(uri, save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients", "losses"])
    model = MLP()
    rec = Recorder(model, "MLP")
    train_loop(model, hook, rec, train_steps=5, eval_steps=2)
    hook.close()  # waits for the uploads
    keys = sorted(o["Key"] for o in s3_endpoint.client().list_objects_v2(
        Bucket=s3_bucket, Prefix="jobs/run1/")["Contents"])
    assert "jobs/run1/training_job_end.ts" in keys
    assert "jobs/run1/collections/000000000/worker_0_collections.json" in keys
    assert [k for k in keys if k.startswith("jobs/run1/index/")] == [
        f"jobs/run1/index/000000000/{s:012d}_worker_0.json" for s in (0, 2, 4, 5)]
    assert not any(k.endswith(".tmp") for k in keys)
    from smdebug_lite import modes
    from smdebug_lite.trials import create_trial

    trial = create_trial(uri)
    assert trial.steps(mode=modes.TRAIN) == [0, 2, 4] and trial.steps(mode=modes.EVAL) == [0]
    for step in (0, 2, 4):
        np.testing.assert_array_equal(trial.tensor("MLP_fc1.weight").value(step, mode=modes.TRAIN),
                                      rec.values[("TRAIN", step)]["MLP_fc1.weight"])
        np.testing.assert_array_equal(
            trial.tensor("gradient/MLP_fc2.bias").value(step, mode=modes.TRAIN),
            rec.values[("TRAIN", step)]["gradient/MLP_fc2.bias"])


def test_upload_failure_is_reported_not_silent(s3_endpoint, s3_bucket):
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logging.getLogger("smdebug_lite").addHandler(handler)
    try:
        hook = smd.Hook(f"s3://{s3_bucket}/run", save_config=smd.SaveConfig(save_interval=1),
                        include_collections=["weights"])
        model = MLP()
        hook.register_module(model)
        model(torch.randn(2, 6))
        model(torch.randn(2, 6))
        client = s3_endpoint.client()
        hook.trial_writer.flush()  # the first steps are uploaded
        for obj in client.list_objects_v2(Bucket=s3_bucket).get("Contents", []):
            client.delete_object(Bucket=s3_bucket, Key=obj["Key"])
        client.delete_bucket(Bucket=s3_bucket)  # the bucket disappears mid-run
        start = time.monotonic()
        for _ in range(4):  # training goes on whatever happens to the uploads
            model(torch.randn(2, 6))
        hook.close()
        assert time.monotonic() - start < 60
    finally:
        logging.getLogger("smdebug_lite").removeHandler(handler)
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR]
    assert errors, "an upload failure must be reported"
    assert any("NoSuchBucket" in m or "does not exist" in m for m in errors), errors
    # What could not be uploaded stays staged where the message says; then the test tidies up.
    kept = {m.split("kept in ")[1].split(")")[0].split()[0] for m in errors if "kept in " in m}
    assert kept, errors
    for staging in kept:
        assert any(Path(staging).rglob("*.tfevents")), staging
        shutil.rmtree(staging)
