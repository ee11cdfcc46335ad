"""Edges of the PyTorch hook and trials that smdebug's own tests and scripts lean on."""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn

import _smdebug_lite_alias

_smdebug_lite_alias.install()

import smdebug.pytorch as smd  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402

torch.set_num_threads(1)


def _train(hook: smd.Hook, model: nn.Module, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        opt.step()


def test_values_saved_before_the_first_step_land_in_step_zero(tmp_path):
    out = str(tmp_path / "run")
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_steps=[0, 1]))
    model = nn.Linear(3, 2)
    hook.register_module(model)
    early = np.array([[1.0, -1.0], [2.0, -2.0]], dtype=np.float32)
    hook.save_tensor("before_mode", torch.tensor(early))
    hook.set_mode(smd.modes.TRAIN)
    hook.save_tensor("after_mode", torch.tensor(early * 2))
    hook.save_scalar("early_scalar", 3.0)
    _train(hook, model, 3)
    hook._cleanup()  # smdebug's close, as its tests call it

    trial = create_trial(out)
    assert trial.loaded_all_steps  # _cleanup wrote the end marker
    for name, want in (("before_mode", early), ("after_mode", early * 2)):
        assert trial.tensor(name).steps() == [0], name
        np.testing.assert_array_equal(trial.tensor(name).value(0), want)
    assert trial.tensor("scalar/early_scalar").steps() == [0]
    assert set(trial.tensor_names(collection="default")) >= {"before_mode", "after_mode"}


def test_last_index_token_names_the_file_as_smdebug_did(tmp_path):
    out = str(tmp_path / "run")
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights"])
    model = nn.Linear(3, 2)
    hook.register_module(model)
    _train(hook, model, 2)
    hook.close()
    trial = create_trial(out)
    assert trial.steps() == [0, 1]
    token = trial.last_index_token
    assert token.startswith(os.path.join(out, "index", "000000000", "")), token
    assert os.path.exists(token)


def test_star_imports_of_the_pytorch_modules_bring_their_names():
    scope: dict = {}
    exec("from smdebug.pytorch.hook import *\nfrom smdebug.pytorch.collection import *", scope)
    assert scope["CollectionKeys"].WEIGHTS == "weights"
    manager = scope["CollectionManager"]()
    assert {"weights", "biases", "gradients", "losses"} <= set(manager.collections)
    assert isinstance(manager.get("weights"), scope["Collection"])


def test_smdebug_action_and_profiler_constant_modules_import():
    from smdebug.profiler.profiler_constants import DEFAULT_PREFIX, HOROVODTIMELINE_SUFFIX
    from smdebug.rules.action.action import Actions
    from smdebug.rules.action.message_action import MessageAction
    from smdebug.rules.action.stop_training_action import StopTrainingAction

    from smdebug_lite.rules.actions import Actions as OurActions

    assert Actions is OurActions and MessageAction and StopTrainingAction
    assert (DEFAULT_PREFIX, HOROVODTIMELINE_SUFFIX) == ("framework/pevents",
                                                        "horovod_timeline.json")


def test_actions_take_smdebugs_keyword():
    from smdebug.rules.action.action import Actions

    spec = '{"name": "StopTraining", "training_job_prefix": "job-"}'
    assert len(Actions(actions_str=spec, rule_name="r").actions) == 1
    assert len(Actions(spec, "r").actions) == 1


def test_flags_read_numpy_bools_and_smdebugs_zero_and_one():
    import numpy as np
    import pytest

    from smdebug_lite.analysis.utils import parse_bool
    from smdebug_lite.config.reduction_config import parse_bool_flag

    assert parse_bool_flag(np.True_, "save_shape") is True
    assert parse_bool(1, None) is True and parse_bool(0, True) is False  # smdebug: 1 == True
    assert parse_bool(1.0, None) is True and parse_bool(0.0, True) is False
    for value in (2, 0.5):
        with pytest.raises(ValueError):
            parse_bool(value, None)
