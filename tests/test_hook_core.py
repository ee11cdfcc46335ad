"""The framework-agnostic hook core: schedules, custom collections, scalars, failure policy."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest
from conftest import kept_log_records

from smdebug_lite import modes
from smdebug_lite.config.save_config import SaveConfig
from smdebug_lite.exceptions import SMDebugRuntimeError
from smdebug_lite.hooks.core import HookCore
from smdebug_lite.rules.actions.stop_signal import write_stop_signal


@pytest.fixture
def warnings_seen():
    """Records smdebug_lite log records (its root logger does not propagate to pytest)."""
    yield from kept_log_records("smdebug_lite")


def index_names(out_dir, step):
    doc = json.loads((out_dir / f"index/000000000/{step:012d}_worker_0.json").read_text())
    return doc["meta"], [e["tensorname"] for e in doc["tensor_payload"]]


def test_included_custom_collection_gets_configs_and_is_reported(tmp_path, warnings_seen):
    hook = HookCore(str(tmp_path), include_collections=["relu_output"])
    hook.start_step()
    assert not hook.disabled
    hook.close()
    assert (tmp_path / "collections/000000000/worker_0_collections.json").is_file()
    assert any("relu_output" in r.getMessage() for r in warnings_seen)


def test_scalar_lands_in_the_step_and_mode_it_was_called_in(tmp_path):
    hook = HookCore(str(tmp_path), save_config=SaveConfig(save_interval=100))
    hook.save_scalar("before_training", 1.0)
    hook.set_mode(modes.TRAIN)
    for _ in range(4):
        hook.start_step()
    hook.save_scalar("train_metric", 3.0)  # TRAIN step 3: not otherwise saved
    hook.set_mode(modes.EVAL)
    hook.start_step()
    hook.close()
    assert index_names(tmp_path, 0)[1] == ["scalar/before_training"]
    meta, names = index_names(tmp_path, 3)
    assert (meta["mode"], meta["mode_step"], names) == ("TRAIN", 3, ["scalar/train_metric"])


def test_sm_metric_scalars_go_to_sagemaker_metrics_on_a_training_job(tmp_path, monkeypatch,
                                                                      warnings_seen):
    metrics_dir = tmp_path / "metrics"
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    monkeypatch.setenv("SAGEMAKER_METRICS_DIRECTORY", str(metrics_dir))
    hook = HookCore(str(tmp_path / "out"), save_config=SaveConfig(save_interval=100))
    hook.save_scalar("early", 0.5, sm_metric=True, timestamp=1700000000.7)  # before any step
    hook.set_mode(modes.TRAIN)
    for _ in range(4):
        hook.start_step()
    hook.save_scalar("accuracy", np.float32(0.25), sm_metric=True, timestamp=1700000001.2)
    hook.save_scalar("not_a_metric", 9.0)
    hook.save_scalar("nan_metric", float("nan"), sm_metric=True)
    hook.save_scalar("label", "text", sm_metric=True)  # saved, not sent (and no failure)
    hook.set_mode(modes.EVAL)
    hook.start_step()
    hook.save_scalar("accuracy", 0.75, sm_metric=True, timestamp=1700000002)
    hook.close()
    assert not hook.disabled
    (metrics_file,) = metrics_dir.iterdir()
    assert metrics_file.name == f"{os.getpid()}.json"
    lines = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    assert lines == [
        {"MetricName": "scalar/early_GLOBAL", "Value": 0.5, "Timestamp": 1700000000,
         "IterationNumber": 0},
        {"MetricName": "scalar/accuracy_TRAIN", "Value": 0.25, "Timestamp": 1700000001,
         "IterationNumber": 3},
        {"MetricName": "scalar/accuracy_EVAL", "Value": 0.75, "Timestamp": 1700000002,
         "IterationNumber": 0},
    ]
    assert any("label" in r.getMessage() and "not a number" in r.getMessage() for r in warnings_seen)
    assert "scalar/accuracy" in index_names(tmp_path / "out", 3)[1]  # still saved with the tensors


def test_an_unwritable_metrics_directory_is_reported_once_and_saving_goes_on(
        tmp_path, monkeypatch, caplog):
    not_a_dir = tmp_path / "metrics"
    not_a_dir.write_text("a file where the directory should be")
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    monkeypatch.setenv("SAGEMAKER_METRICS_DIRECTORY", str(not_a_dir))
    hook = HookCore(str(tmp_path / "out"), save_config=SaveConfig(save_interval=1))
    for _ in range(3):
        hook.start_step()
        hook.save_scalar("accuracy", 0.5, sm_metric=True)
    hook.close()
    assert not hook.disabled
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(not_a_dir) in errors[0], errors
    assert "scalar/accuracy" in index_names(tmp_path / "out", 2)[1]


def test_sm_metric_writes_nothing_off_sagemaker(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    monkeypatch.setenv("SAGEMAKER_METRICS_DIRECTORY", str(tmp_path / "metrics"))
    hook = HookCore(str(tmp_path / "out"))
    hook.start_step()
    hook.save_scalar("accuracy", 0.5, sm_metric=True)
    hook.close()
    assert not (tmp_path / "metrics").exists()


def test_save_tensor_goes_to_every_named_collection(tmp_path):
    hook = HookCore(str(tmp_path), save_config=SaveConfig(save_interval=1))
    hook.start_step()
    hook.save_tensor("my_value", np.arange(3), ["custom_a", "custom_b"])
    hook.close()
    assert "my_value" in index_names(tmp_path, 0)[1]
    colls = json.loads((tmp_path / "collections/000000000/worker_0_collections.json").read_text())
    for name in ("custom_a", "custom_b"):
        assert colls["collections"][name]["tensor_names"] == ["my_value"]


def test_internal_error_disables_the_hook_once_without_raising(tmp_path, warnings_seen):
    hook = HookCore(str(tmp_path))
    with hook.failsafe("test"):
        raise ValueError("boom")
    with hook.failsafe("test"):
        raise ValueError("boom again")
    assert hook.disabled
    errors = [r for r in warnings_seen if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "boom" in errors[0].getMessage()
    hook.close()


def test_finished_out_dir_is_refused(tmp_path):
    (tmp_path / "training_job_end.ts").write_bytes(b"")
    with pytest.raises(SMDebugRuntimeError, match="training_job_end.ts"):
        HookCore(str(tmp_path))


def test_stop_signal_from_a_rule_is_seen(tmp_path):
    hook = HookCore(str(tmp_path))
    assert hook.stop_requested() is False
    write_stop_signal(str(tmp_path), "LossNotDecreasing", "stop now")
    hook.stop_signal.check_now()  # skip the poll interval
    assert hook.stop_requested() is True
    hook.close()


def test_a_disabled_hook_still_ends_the_run_on_disk(tmp_path):
    """Readers must learn that training ended (not wait out a timeout) after a hook failure."""
    hook = HookCore(str(tmp_path), save_config=SaveConfig(save_interval=1))
    hook.start_step()
    with hook.failsafe("test"):
        raise RuntimeError("broken before anything was written")
    hook.close()
    assert (tmp_path / "collections/000000000/worker_0_collections.json").is_file()
    assert (tmp_path / "training_job_end.ts").is_file()
