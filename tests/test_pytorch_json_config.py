"""PyTorch hook from SageMaker's DebugHookConfig JSON: create_from_json_file, get_hook, USE_SMDEBUG."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from _pytorch_support import MLP, read_out_dir, steps_of, train_loop

import smdebug_lite.pytorch as smd
from smdebug_lite.config.hook_json import HookConfigError

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for var in ("SMDEBUG_CONFIG_FILE_PATH", "USE_SMDEBUG", "TRAINING_JOB_NAME"):
        monkeypatch.delenv(var, raising=False)
    smd.del_hook()
    yield
    smd.del_hook()


def _write(tmp_path, doc) -> str:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _config(tmp_path, **extra):
    return {"S3OutputPath": "s3://bucket/prefix", "LocalPath": str(tmp_path / "tensors"), **extra}


def test_create_from_json_file_applies_hook_and_collection_parameters(tmp_path):
    path = _write(tmp_path, _config(
        tmp_path,
        HookParameters={"save_interval": "3", "eval.save_interval": "1", "reductions": "mean,abs_l2_norm",
                        "save_raw_tensor": True},
        CollectionConfigurations=[
            {"CollectionName": "weights"},
            {"CollectionName": "gradients", "CollectionParameters": {"train.save_steps": "1,4"}},
            {"CollectionName": "fc1_out", "CollectionParameters": {"include_regex": "fc1_output_0",
                                                                    "save_interval": "2"}},
        ]))
    hook = smd.Hook.create_from_json_file(path)
    assert hook.out_dir == str(tmp_path / "tensors")
    assert smd.get_hook() is hook  # constructing a hook makes it the current one
    train_loop(MLP(), hook, None, train_steps=6, eval_steps=2)
    hook.close()
    data = read_out_dir(tmp_path / "tensors")
    assert steps_of(data, "MLP_fc1.weight", "TRAIN") == [0, 3]
    assert steps_of(data, "MLP_fc1.weight", "EVAL") == [0, 1]
    assert steps_of(data, "gradient/MLP_fc1.weight", "TRAIN") == [0, 1, 3, 4]
    assert steps_of(data, "fc1_output_0", "TRAIN") == [0, 2, 4]
    assert steps_of(data, "CrossEntropyLoss_output_0", "TRAIN") == [0, 3]  # losses always included
    assert "smdebug/reductions/abs_l2/MLP_fc1.weight" in data[("worker_0", 0)].tensors
    assert "MLP_fc1.bias" not in data[("worker_0", 0)].tensors  # biases not configured


def test_get_hook_singleton_and_env(tmp_path, monkeypatch):
    assert smd.get_hook() is None
    assert smd.get_hook(create_if_not_exists=True, json_config_path=str(tmp_path / "missing.json")) is None
    path = _write(tmp_path, _config(tmp_path))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", path)
    hook = smd.get_hook(create_if_not_exists=True)
    assert isinstance(hook, smd.Hook)
    assert smd.get_hook() is hook and smd.get_hook(create_if_not_exists=True) is hook
    assert hook.include_collections == ["losses"]  # framework defaults when none are listed
    hook.close()
    smd.del_hook()
    for off in ("0", "false", "No", "OFF"):
        monkeypatch.setenv("USE_SMDEBUG", off)
        assert smd.get_hook(create_if_not_exists=True) is None
    monkeypatch.setenv("USE_SMDEBUG", "1")
    other = smd.Hook(str(tmp_path / "explicit"))
    smd.set_hook(other)
    assert smd.get_hook(create_if_not_exists=True) is other
    other.close()


def test_bad_config_is_one_clear_error_and_no_hook(tmp_path, monkeypatch):
    path = _write(tmp_path, _config(tmp_path, HookParameters={"save_interval": "often"}))
    with pytest.raises(HookConfigError) as err:
        smd.Hook.create_from_json_file(path)
    assert "save_interval" in str(err.value) and "often" in str(err.value) and path in str(err.value)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("smdebug_lite").addHandler(handler)
    try:
        monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", path)
        assert smd.get_hook(create_if_not_exists=True) is None
        assert smd.get_hook(create_if_not_exists=True) is None
    finally:
        logging.getLogger("smdebug_lite").removeHandler(handler)
    errors = [r.getMessage() for r in records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "save_interval" in errors[0] and "'often'" in errors[0]


def test_sagemaker_sdk_generated_config(tmp_path):
    debugger = pytest.importorskip("sagemaker.core.debugger")
    cfg = debugger.DebuggerHookConfig(
        s3_output_path="s3://bucket/debug",
        container_local_output_path=str(tmp_path / "tensors"),
        hook_parameters={"save_interval": "2"},
        collection_configs=[
            debugger.CollectionConfig(name="weights"),
            debugger.CollectionConfig(name="gradients", parameters={"save_interval": "1"}),
            debugger.CollectionConfig(name="losses", parameters={"save_interval": "1"}),
        ],
    )
    path = _write(tmp_path, cfg._to_request_dict())
    hook = smd.Hook.create_from_json_file(path)
    train_loop(MLP(), hook, None, train_steps=4, eval_steps=0)
    hook.close()
    data = read_out_dir(tmp_path / "tensors")
    assert steps_of(data, "MLP_fc2.weight", "TRAIN") == [0, 2]
    assert steps_of(data, "gradient/MLP_fc2.weight", "TRAIN") == [0, 1, 2, 3]
    assert steps_of(data, "CrossEntropyLoss_output_0", "TRAIN") == [0, 1, 2, 3]
