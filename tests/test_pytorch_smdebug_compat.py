"""Real smdebug 1.0.34 (reference venv) reads what our PyTorch hook writes, with the same answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pytorch_support import (
    MLP,
    Recorder,
    SmallCNN,
    read_out_dir,
    read_with_our_trial,
    read_with_smdebug,
    ref_available,
    train_loop,
)

import smdebug_lite.pytorch as smd

pytestmark = pytest.mark.reference
torch.set_num_threads(1)

_RED_NAME = {"l1": "l1", "l2": "l2"}


def _ours_as_smdebug_answers(data) -> tuple[dict, dict, dict]:
    """Our reader's view in the shape of REF_READER's output."""
    values, reductions, steps = {}, {}, {"TRAIN": [], "EVAL": []}
    for (_, _), d in sorted(data.items()):
        steps[d.mode].append(d.mode_step)
        for name, v in d.tensors.items():
            if name.startswith("smdebug/reductions/"):
                red, _, base = name[len("smdebug/reductions/"):].partition("/")
                reductions[f"{d.mode}/{d.mode_step}/{base}/{red}"] = float(v)
            else:
                values[f"{d.mode}/{d.mode_step}/{name}"] = [str(v.dtype), list(v.shape),
                                                            v.astype(np.float64).reshape(-1).tolist()]
    return values, reductions, steps


def _runs(tmp_path):
    runs = {}
    torch.manual_seed(1)
    out = tmp_path / "mlp"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "biases", "gradients", "losses"],
                    reduction_config=smd.ReductionConfig(reductions=["mean", "max", "variance"],
                                                         abs_norms=["l2"], norms=["l1"],
                                                         save_raw_tensor=True))
    model = MLP()
    rec = Recorder(model, "MLP")
    train_loop(model, hook, rec, train_steps=6, eval_steps=4)
    hook.save_scalar("final", 3.25)
    hook.close()
    runs["mlp"] = (out, rec)

    torch.manual_seed(2)
    out = tmp_path / "cnn"
    hook = smd.Hook(str(out), save_all=True, save_config=smd.SaveConfig(
        mode_save_configs={smd.modes.TRAIN: smd.SaveConfigMode(save_interval=3),
                           smd.modes.EVAL: smd.SaveConfigMode(save_steps=[1])}))
    model = SmallCNN()
    rec = Recorder(model, "SmallCNN")
    train_loop(model, hook, rec, train_steps=5, eval_steps=3, shape=(2, 1, 5, 5), n_classes=4)
    hook.close()
    runs["cnn"] = (out, rec)

    torch.manual_seed(3)
    out = tmp_path / "reductions_only"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients"],
                    reduction_config=smd.ReductionConfig(reductions=["min", "std"],
                                                         abs_reductions=["sum"]))
    model = MLP()
    rec = Recorder(model, "MLP")
    train_loop(model, hook, rec, train_steps=3, eval_steps=1)
    hook.close()
    runs["reductions_only"] = (out, rec)

    torch.manual_seed(4)
    out = tmp_path / "bfloat16"
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients"],
                    reduction_config=smd.ReductionConfig(reductions=["max"], save_raw_tensor=True))
    model = MLP().to(torch.bfloat16)
    hook.register_module(model)
    hook.set_mode(smd.modes.TRAIN)
    model(torch.randn(3, 6, dtype=torch.bfloat16)).float().sum().backward()
    hook.close()
    runs["bfloat16"] = (out, Recorder(model, "MLP"))
    return runs


def test_smdebug_reads_our_pytorch_output_identically(tmp_path):
    ok, reason = ref_available()
    if not ok:
        pytest.skip(reason)
    runs = _runs(tmp_path)
    ref = read_with_smdebug(*(str(out) for out, _ in runs.values()))
    for label, (out, rec) in runs.items():
        theirs = ref[str(out)]
        data = read_out_dir(out)
        values, reductions, steps = _ours_as_smdebug_answers(data)
        assert theirs["workers"] == ["worker_0"], label
        base_names = {k.split("/", 2)[2] for k in values} | {k.split("/", 2)[2].rsplit("/", 1)[0] for k in reductions}
        assert set(theirs["tensor_names"]) == base_names, label
        for mode in ("TRAIN", "EVAL"):
            assert theirs["steps"][mode] == sorted(set(steps[mode])), (label, mode)
        for key, v in values.items():
            assert theirs["values"][key] == v, (label, key)
        # Tensors with only reductions saved: smdebug says the value is unavailable.
        for key, v in theirs["values"].items():
            if key not in values:
                assert v[0] == "unavailable", (label, key)
        assert theirs["reductions"] == reductions, label
        # And both agree with what the test captured independently with plain torch.
        for (mode, step), expected in rec.values.items():
            for name, value in expected.items():
                key = f"{mode}/{step}/{name}"
                if key in theirs["values"] and theirs["values"][key][0] != "unavailable":
                    np.testing.assert_array_equal(
                        np.array(theirs["values"][key][2]).reshape(value.shape), value, err_msg=key)
        # smdebug_lite's own trial gives the very same answers.
        assert read_with_our_trial(str(out)) == theirs, label
    mlp = ref[str(runs["mlp"][0])]
    # EVAL 3 exists only because save_scalar("final") was called during it
    assert mlp["steps"]["TRAIN"] == [0, 2, 4] and mlp["steps"]["EVAL"] == [0, 2, 3]
    assert "scalar/final" in mlp["tensor_names"]
    cnn = ref[str(runs["cnn"][0])]
    assert cnn["steps"]["TRAIN"] == [0, 3] and cnn["steps"]["EVAL"] == [0, 1]
    assert {"conv1_output_0", "bn_input_0", "SmallCNN_input_0", "SmallCNN_output_0",
            "gradient/SmallCNN_conv1.weight", "CrossEntropyLoss_output_0",
            "CrossEntropyLoss_input_1"} <= set(cnn["tensor_names"])
