"""``smdebug.core.*`` (configuration side) served by smdebug_lite's compatibility layer.

Everything is imported the way smdebug 1.0.34 code imports it (``from smdebug.core.modes import
ModeKeys``) through the alias, and checked to be smdebug_lite's own objects, to behave as smdebug
did, and, where cheap, to agree with the real smdebug in the reference venv.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import _smdebug_lite_alias

_smdebug_lite_alias.install()

import smdebug  # noqa: E402
import smdebug.core.collection as core_collection  # noqa: E402
import smdebug.core.config_constants as constants  # noqa: E402
import smdebug.core.json_config as json_config  # noqa: E402
import smdebug.core.modes as core_modes  # noqa: E402
import smdebug.core.reduction_config as core_reduction_config  # noqa: E402
import smdebug.core.save_config as core_save_config  # noqa: E402
import smdebug.pytorch  # noqa: E402
import smdebug.rules  # noqa: E402
from refvenv import ref_python, run_ref  # noqa: E402
from smdebug.core.collection_manager import CollectionManager  # noqa: E402
from smdebug.core.config_validator import get_config_validator, reset_config_validator  # noqa: E402
from smdebug.core.error_handling_agent import BASE_ERROR_MESSAGE  # noqa: E402
from smdebug.core.hook import BaseHook, CallbackHook  # noqa: E402
from smdebug.core.hook_utils import get_tensorboard_dir, verify_and_get_out_dir  # noqa: E402
from smdebug.core.logger import DuplicateLogFilter, get_logger  # noqa: E402
from smdebug.core.reductions import (  # noqa: E402
    get_basic_numpy_reduction,
    get_numpy_reduction,
    get_reduction_tensor_name,
    reverse_reduction_tensor_name,
)
from smdebug.core.state_store import StateStore  # noqa: E402
from smdebug.core.utils import (  # noqa: E402
    FRAMEWORK,
    SagemakerSimulator,
    error_handling_agent,
    flatten,
    get_path_to_collections,
    get_relative_event_file_path,
    get_worker_name_from_collection_file,
    index,
    is_first_process,
    is_framework_version_supported,
    is_s3,
    load_json_as_dict,
    make_numpy_array,
    match_inc,
    parse_worker_name_from_file,
    size_and_shape,
    split,
)
from smdebug.exceptions import IndexReaderException, SMDebugTypeError  # noqa: E402

import smdebug_lite  # noqa: E402
import smdebug_lite.pytorch as lite_pt  # noqa: E402
from smdebug_lite.config.collection import builtin_collections  # noqa: E402
from smdebug_lite.config.collection_manager import (  # noqa: E402
    CollectionManager as LiteCollectionManager,
)
from smdebug_lite.hooks.training_state import TrainingState  # noqa: E402
from smdebug_lite.modes import ModeKeys  # noqa: E402
from smdebug_lite.trials import create_trial  # noqa: E402

torch.set_num_threads(1)


def _ref_or_skip() -> None:
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)


def _ref_json(code: str, *args: str) -> dict:
    proc = run_ref(textwrap.dedent(code), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _train(hook, steps: int = 4) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    for _ in range(steps):
        loss = loss_fn(model(torch.randn(8, 5)), torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()


pytestmark = pytest.mark.usefixtures("no_current_hook")


# -- the same objects as smdebug_lite's -----------------------------------------------------


def test_classes_are_smdebug_lites_own():
    import smdebug.xgboost  # here, not at the top: collecting stays free of xgboost

    assert core_modes.ModeKeys is ModeKeys
    assert smdebug.modes.TRAIN is ModeKeys.TRAIN
    assert core_collection.Collection is smdebug_lite.Collection
    assert core_collection.CollectionKeys is smdebug_lite.CollectionKeys is smdebug.CollectionKeys
    assert core_save_config.SaveConfig is smdebug_lite.SaveConfig is smdebug.SaveConfig
    assert core_save_config.SaveConfigMode is smdebug_lite.SaveConfigMode
    assert core_reduction_config.ReductionConfig is smdebug_lite.ReductionConfig
    # smdebug's manager interface differs (export(out_dir, filename), get creates): a subclass
    assert issubclass(CollectionManager, LiteCollectionManager)
    assert BaseHook is CallbackHook
    assert issubclass(lite_pt.Hook, BaseHook) and issubclass(smdebug.xgboost.Hook, BaseHook)
    from smdebug.pytorch.singleton_utils import del_hook, get_hook, set_hook
    from smdebug.xgboost.singleton_utils import get_hook as xgb_get_hook

    assert (get_hook, set_hook, del_hook) == (lite_pt.get_hook, lite_pt.set_hook, lite_pt.del_hook)
    assert xgb_get_hook is smdebug.xgboost.get_hook
    assert smdebug.xgboost.create_trial is smdebug.pytorch.create_trial is create_trial
    from smdebug_lite.rules.required_tensors_for_trial import RequiredTensorsForTrial

    assert smdebug.rules.RequiredTensorsForTrial is RequiredTensorsForTrial
    assert json_config.CONFIG_FILE_PATH_ENV_STR == "SMDEBUG_CONFIG_FILE_PATH"


@pytest.mark.reference
def test_constants_and_names_match_smdebug():
    """Every constant of config_constants, the mode/collection/config module constants and the
    public names of smdebug's package __init__s, compared with the real smdebug 1.0.34."""
    _ref_or_skip()
    ref = _ref_json(
        """
        import json, importlib
        import smdebug.core.config_constants as cc, smdebug.core.modes as m
        import smdebug.core.collection as c, smdebug.core.save_config as s
        import smdebug.core.reduction_config as r, smdebug.core.collection_manager as cm
        def plain(v):
            return sorted(v) if isinstance(v, (set, frozenset)) else v
        out = {"constants": {k: v for k, v in vars(cc).items() if k.isupper()}}
        out["modes"] = {k: [x.name for x in v] if k == "ALLOWED_MODES" else v
                        for k, v in vars(m).items() if k.isupper()}
        out["collection"] = {k: plain(v) for k, v in vars(c).items() if k.isupper()}
        out["save_config"] = {k: v for k, v in vars(s).items() if k.isupper()}
        out["reduction_config"] = {k: v for k, v in vars(r).items() if k.isupper()}
        out["collection_manager"] = {k: v for k, v in vars(cm).items() if k.isupper()}
        names = {}
        for mod in ["smdebug", "smdebug.pytorch", "smdebug.xgboost", "smdebug.trials",
                    "smdebug.rules", "smdebug.exceptions", "smdebug.analysis.utils"]:
            module = importlib.import_module(mod)
            names[mod] = sorted(n for n, v in vars(module).items() if not n.startswith("_")
                                and type(v).__name__ != "module")
        out["names"] = names
        print(json.dumps(out))
        """
    )
    import importlib

    import smdebug.core.collection_manager as core_cm

    def ours(module) -> dict:
        out = {}
        for k, v in vars(module).items():
            if not k.isupper() or k.startswith("_"):
                continue
            if isinstance(v, (set, frozenset)):
                v = sorted(v)
            elif k == "ALLOWED_MODES":
                v = [x.name for x in v]
            out[k] = v
        return out

    for key, module in [("constants", constants), ("modes", core_modes),
                        ("collection", core_collection), ("save_config", core_save_config),
                        ("reduction_config", core_reduction_config),
                        ("collection_manager", core_cm)]:
        mine = ours(module)
        for name, value in ref[key].items():
            assert name in mine, f"{module.__name__} lacks {name}"
            assert mine[name] == value, f"{module.__name__}.{name}: {mine[name]!r} != {value!r}"
    for mod, names in ref["names"].items():
        module = importlib.import_module(mod)
        # smdebug.exceptions' own import of the modes enum is not part of its interface
        missing = [n for n in names if not hasattr(module, n)
                   and (mod, n) != ("smdebug.exceptions", "modes")]
        assert not missing, f"{mod} lacks {missing}"


def test_modes_helpers():
    assert core_modes.str_to_mode_keys("eval") is ModeKeys.EVAL
    with pytest.raises(ValueError, match="TRAIN"):
        core_modes.str_to_mode_keys("TRAIN")  # smdebug accepted only the lower-case names
    assert core_modes.ALLOWED_MODES + [None] == [*ModeKeys, None]  # a list, as in smdebug


# -- CollectionManager -----------------------------------------------------------------------


def _manager() -> CollectionManager:
    cm = CollectionManager()
    cm.create_collection("default")
    cm.get("default").include("loss")
    cm.get("default").add_tensor_name("fc.weight")
    cm.add(core_collection.Collection("trial1"))
    cm.add("trial2")
    cm.get("trial2").include("total_loss")
    return cm


def test_collection_manager_smdebug_semantics():
    cm = CollectionManager()
    assert len(cm.collections) == 0  # smdebug's base manager creates no built-ins
    assert cm.get("weights").name == "weights"  # get() creates a missing collection
    with pytest.raises(KeyError, match="nope"):
        cm.get("nope", create=False)
    with pytest.raises(KeyError):
        cm["absent"]
    cm.update_meta({"num_workers": 3, "framework": "pytorch"})
    assert cm.get_num_workers() == 3 and cm._meta == {"framework": "pytorch", "num_workers": 3}
    with pytest.raises(SMDebugTypeError):
        cm.update_meta(["num_workers", 2])
    cm2 = CollectionManager.load_from_string(cm.export())
    assert cm2 == cm and cm2._meta == cm._meta
    assert CollectionManager.load_from_string(json.loads(cm.export())) == cm
    assert CollectionManager.load_from_string(None) is None
    assert CollectionManager.load_from_string("None") is None


@pytest.mark.reference
def test_collection_manager_export_load_round_trip(tmp_path):
    """smdebug's export(out_dir, filename) writes the trial's collections file; load reads it
    back equal; our Trial and the real smdebug both read the file."""
    cm = _manager()
    cm.export(str(tmp_path), constants.DEFAULT_COLLECTIONS_FILE_NAME)
    path = Path(get_path_to_collections(str(tmp_path))) / constants.DEFAULT_COLLECTIONS_FILE_NAME
    assert path == tmp_path / "collections" / "000000000" / "worker_0_collections.json"
    loaded = CollectionManager.load(str(path))
    assert loaded == cm and type(loaded) is CollectionManager
    assert list(loaded.collections) == ["default", "trial1", "trial2"]
    assert loaded.get("default").tensor_names == {"fc.weight"}

    class Tagged(core_collection.Collection):
        pass

    tagged = CollectionManager.load(str(path), Tagged)
    assert all(type(c) is Tagged for c in tagged.collections.values())
    assert tagged == cm

    # our reader accepts the file as a trial's collections
    (tmp_path / "training_job_end.ts").touch()
    trial = create_trial(str(tmp_path))
    assert trial.collection("trial2").include_regex == ["total_loss"]

    _ref_or_skip()
    ref = _ref_json(
        """
        import json, sys
        from smdebug.core.collection_manager import CollectionManager
        cm = CollectionManager.load(sys.argv[1])
        print(json.dumps(cm.to_json_dict()))
        """,
        str(path),
    )
    assert ref == json.loads(path.read_text())


def test_collection_manager_export_to_s3(s3_endpoint, s3_bucket):
    cm = _manager()
    cm.export(f"s3://{s3_bucket}/run1", constants.DEFAULT_COLLECTIONS_FILE_NAME)
    body = s3_endpoint.client().get_object(
        Bucket=s3_bucket, Key="run1/collections/000000000/worker_0_collections.json"
    )["Body"].read()
    assert CollectionManager.load_from_string(body) == cm


def test_xgboost_collection_manager_has_the_builtins():
    from smdebug.xgboost.collection import CollectionKeys
    from smdebug.xgboost.collection import CollectionManager as XgbManager

    cm = XgbManager()
    expected = builtin_collections("xgboost")
    assert list(cm.collections) == list(expected)
    assert {n: c.include_regex for n, c in cm.collections.items()} == expected
    assert core_collection.DEFAULT_XGBOOST_COLLECTIONS <= set(cm.collections)
    assert cm.get(CollectionKeys.TREES).include_regex == ["^trees/.*"]
    assert len(XgbManager(create_default=False).collections) == 0


# -- DebugHookConfig JSON -----------------------------------------------------------------------

_DOC = {
    "S3OutputPath": "s3://bucket/prefix",
    "LocalPath": "/tmp/compat-json-test",
    "HookParameters": {
        "save_interval": "2",
        "save_all": "true",
        "include_workers": "one",
        "export_tensorboard": "true",
        "tensorboard_dir": "/tmp/tensorboard",
        "include_regex": "relu, fc1",
    },
    "CollectionConfigurations": [
        {"CollectionName": "weights", "CollectionParameters": {"save_histogram": "false"}},
        {
            "CollectionName": "gradients",
            "CollectionParameters": {
                "save_histogram": False,
                "train.save_interval": "5",
                "reductions": "mean,abs_max",
            },
        },
        {
            "CollectionName": "mine",
            "CollectionParameters": {"include_regex": "conv.*", "save_steps": "1,3",
                                     "end_step": "10"},
        },
    ],
}


def _json_config_summary(path: str) -> dict:
    params = json_config.get_json_config_as_dict(json_config_path=path)
    hook_params = json_config.collect_hook_config_params(params)
    cm = CollectionManager()
    json_config.add_collections_to_manager(cm, params, hook_params)
    return {
        "include_collections": json_config.get_include_collections(params),
        "hook": {k: hook_params[k] for k in ("out_dir", "save_all", "include_workers",
                                             "export_tensorboard", "tensorboard_dir",
                                             "include_regex")},
        "modes": {m.name: v for m, v in hook_params["save_config_modes"].items()},
        "collections": {n: c.to_json_dict() for n, c in cm.collections.items()},
    }


@pytest.mark.reference
def test_json_config_functions_match_smdebug(tmp_path):
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(_DOC))
    ours = _json_config_summary(str(path))
    assert ours["include_collections"] == ["weights", "gradients", "mine"]
    assert ours["hook"]["include_regex"] == ["relu", "fc1"]
    assert ours["modes"]["TRAIN"] == {"save_interval": 2}
    assert ours["collections"]["weights"]["save_histogram"] is False
    _ref_or_skip()
    ref = _ref_json(
        """
        import json, sys
        import smdebug.core.json_config as jc
        from smdebug.core.collection_manager import CollectionManager
        params = jc.get_json_config_as_dict(json_config_path=sys.argv[1])
        hook_params = jc.collect_hook_config_params(params)
        cm = CollectionManager()
        jc.add_collections_to_manager(cm, params, hook_params)
        print(json.dumps({
            "include_collections": jc.get_include_collections(params),
            "hook": {k: hook_params[k] for k in ("out_dir", "save_all", "include_workers",
                                                 "export_tensorboard", "tensorboard_dir",
                                                 "include_regex")},
            "modes": {m.name: {k: int(v) for k, v in d.items() if k != "save_steps"}
                      for m, d in hook_params["save_config_modes"].items()},
            "collections": {n: c.to_json_dict() for n, c in cm.collections.items()},
        }))
        """,
        str(path),
    )
    assert ours == ref


def test_create_hook_from_json_config_via_env(tmp_path, monkeypatch):
    """A real PyTorch hook made from a DebugHookConfig file named by SMDEBUG_CONFIG_FILE_PATH
    saves what the file asks for."""
    out_dir = tmp_path / "run"
    doc = {
        "LocalPath": str(out_dir),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [
            {"CollectionName": "weights"},
            {"CollectionName": "gradients", "CollectionParameters": {"save_steps": "1"}},
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "1"}},
        ],
    }
    config = tmp_path / "hook.json"
    config.write_text(json.dumps(doc))
    monkeypatch.setenv(json_config.CONFIG_FILE_PATH_ENV_STR, str(config))
    hook = json_config.create_hook_from_json_config(smdebug.pytorch.Hook, None)
    assert isinstance(hook, lite_pt.Hook) and hook.out_dir == str(out_dir)
    assert hook.get_collection("gradients").save_config.get_save_config(ModeKeys.TRAIN).save_steps \
        == [1]
    _train(hook, steps=4)
    trial = create_trial(str(out_dir))
    weight = trial.tensor_names(collection="weights")[0]
    gradient = trial.tensor_names(collection="gradients")[0]
    loss = trial.tensor_names(collection="losses")[0]
    assert trial.tensor(weight).steps() == [0, 2]
    assert trial.tensor(gradient).steps() == [0, 1, 2]  # its own save_steps plus the interval
    assert trial.tensor(loss).steps() == [0, 1, 2, 3]

    # rules see the same data through smdebug's per-trial required-tensors object
    req = smdebug.rules.RequiredTensorsForTrial(trial)
    req.add(weight, [0, 2])
    req.add("^gradient", [1], should_match_regex=True)
    assert set(req.get_names()) == {weight, *trial.tensor_names(regex="^gradient")}
    req.fetch()
    assert req.get_tensor_steps(weight) == [0, 2]


def test_json_config_missing_collection_name_is_an_error(tmp_path):
    bad = {"CollectionConfigurations": [{"CollectionParameters": {}}]}
    with pytest.raises(ValueError, match="CollectionName"):
        json_config.get_include_collections(bad)


# -- StateStore ------------------------------------------------------------------------------


@pytest.fixture
def checkpoints(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    config = tmp_path / "checkpointconfig.json"
    config.write_text(json.dumps({constants.CHECKPOINT_DIR_KEY: str(ckpt)}))
    monkeypatch.setenv(constants.CHECKPOINT_CONFIG_FILE_PATH_ENV_VAR, str(config))
    return ckpt


def test_state_store_without_checkpoint_config(tmp_path, monkeypatch):
    monkeypatch.setenv(constants.CHECKPOINT_CONFIG_FILE_PATH_ENV_VAR, str(tmp_path / "none.json"))
    store = StateStore()
    assert store._checkpoint_dir is None
    assert store.is_checkpoint_updated() is False
    assert store.get_last_saved_state() is None


@pytest.mark.reference
def test_state_store_sees_checkpoint_changes_and_records_states(checkpoints):
    states = [
        {"training-run": 0, "latest-global-step-saved": 10, "latest-global-step-seen": 12,
         "latest-mode-step": {"TRAIN": 12}},
        {"training-run": 0, "latest-global-step-saved": 4, "latest-global-step-seen": 5,
         "latest-mode-step": {"TRAIN": 5}},
    ]
    (checkpoints / constants.METADATA_FILENAME).write_text(json.dumps(states))
    store = StateStore()
    assert store._checkpoint_dir == str(checkpoints)
    assert store.get_last_saved_state() == states[0]  # the latest step seen, not the last line
    assert store.is_checkpoint_updated() is False  # only the states file so far

    (checkpoints / "sub").mkdir()
    (checkpoints / "sub" / "model.pt").write_text("one")
    assert store.is_checkpoint_updated() is True
    assert store.is_checkpoint_updated() is False  # once per change
    new_state = {"training-run": 1, "latest-global-step-saved": 20,
                 "latest-global-step-seen": 21, "latest-mode-step": {"TRAIN": 21}}
    store.update_state(new_state)
    assert store.is_checkpoint_updated() is False  # the states file is not a checkpoint
    with open(checkpoints / "sub" / "model.pt", "a") as f:
        f.write("two")
    assert store.is_checkpoint_updated() is True

    on_disk = json.loads((checkpoints / constants.METADATA_FILENAME).read_text())
    assert on_disk[-1] == new_state and len(on_disk) == 3
    # the hooks resume from what StateStore recorded
    assert TrainingState(str(checkpoints)).resume_counters() == (21, {ModeKeys.TRAIN: 21}, 20)

    _ref_or_skip()
    ref = _ref_json(
        """
        import json
        from smdebug.core.state_store import StateStore
        print(json.dumps(StateStore().get_last_saved_state()))
        """
    )
    assert ref == new_state


# -- ErrorHandlingAgent --------------------------------------------------------------------------


@pytest.fixture
def agent_log(tmp_path):
    path = tmp_path / "agent.log"
    logger = get_logger()
    handler = logging.FileHandler(path)
    logger.addHandler(handler)
    duplicate = next(f for f in logger.filters if isinstance(f, DuplicateLogFilter))
    logger.removeFilter(duplicate)
    yield path
    logger.removeHandler(handler)
    handler.close()
    logger.addFilter(duplicate)
    error_handling_agent.disable_smdebug = False
    error_handling_agent.hook = None


def test_agent_swallows_an_internal_error_and_disables(agent_log):
    calls = []

    @error_handling_agent.catch_smdebug_errors(default_return_val=False)
    def broken():
        calls.append(1)
        raise ValueError("internal failure xyz")

    @error_handling_agent.catch_smdebug_errors(default_return_val=lambda x: x * 2)
    def fine(x):
        calls.append(2)
        return x

    assert fine(3) == 3 and error_handling_agent.disable_smdebug is False
    assert broken() is False
    assert error_handling_agent.disable_smdebug is True
    log = agent_log.read_text()
    assert log.count(BASE_ERROR_MESSAGE) == 1 and "internal failure xyz" in log
    assert fine(5) == 10  # disabled: the default is computed from the call, fine() not run
    assert calls == [2, 1]


def test_agent_disables_a_default_hook_and_reraises_for_a_custom_one(agent_log, tmp_path):
    @error_handling_agent.catch_smdebug_errors()
    def callback():
        raise RuntimeError("hook callback failed")

    hook = lite_pt.Hook(out_dir=str(tmp_path / "default"))  # the current hook now
    assert callback() is None
    assert hook.disabled is True and error_handling_agent.disable_smdebug is True
    _train(hook, steps=2)  # training goes on; the disabled hook saves no step
    assert not list((tmp_path / "default").glob("events/*/*.tfevents"))

    error_handling_agent.disable_smdebug = False
    custom = lite_pt.Hook(out_dir=str(tmp_path / "custom"), include_collections=["all"])
    error_handling_agent.set_hook(custom)
    with pytest.raises(RuntimeError, match="hook callback failed"):
        callback()
    assert custom.disabled is False and error_handling_agent.disable_smdebug is False
    custom.close()


# -- utils, hook_utils, reductions, validator, singleton ------------------------------------


def test_utils_helpers(tmp_path):
    assert is_s3("s3://bucket/a/b") == (True, "bucket", "a/b")
    assert is_s3("s3://bucket") == (True, "bucket", "")
    assert is_s3("/local/x") == (False, None, None)
    assert split("foo, bar,b az") == ["foo", "bar", "b az"]
    assert flatten([1, [2, [3, (4,)]]]) == [1, 2, 3, (4,)]
    assert match_inc("dense/weight", ["^conv", "weight$"]) and not match_inc("a", ["b"])
    assert index([1, 3, 5], 3) == 1
    with pytest.raises(ValueError):
        index([1, 3, 5], 4)
    assert make_numpy_array(3.5).tolist() == [3.5]
    assert make_numpy_array((1, 2)).tolist() == [1, 2]
    assert make_numpy_array({"a": 1}).item() == {"a": 1}
    with pytest.raises(SMDebugTypeError):
        make_numpy_array(None)
    assert size_and_shape(np.zeros((2, 3), np.float32)) == (24, (2, 3))
    assert size_and_shape("abcd") == (4, [4])
    assert load_json_as_dict('{"a": 1}') == {"a": 1} and load_json_as_dict("None") is None
    assert get_relative_event_file_path("/x/events/000000000002/000000000002_worker_0.tfevents") \
        == "events/000000000002/000000000002_worker_0.tfevents"
    assert parse_worker_name_from_file("/t/index/000000001/000000001230_worker_2.json") \
        == "worker_2"
    assert parse_worker_name_from_file(
        "/t/index/000000000/000000000499__job-worker_replica-0_task-1_device-GPU-6.json"
    ) == "/job:worker/replica:0/task:1/device:GPU:6"
    with pytest.raises(IndexReaderException):
        parse_worker_name_from_file("/t/index/000000001/000000001230_worker_2.json.tmp")
    assert get_worker_name_from_collection_file(
        "/tmp/collections/000000000/job-worker_1_collections.json") == "job-worker_1"
    claim = tmp_path / "claimed"
    assert is_first_process(str(claim)) is True
    assert is_first_process(str(claim)) is False
    assert (claim / constants.CLAIM_FILENAME).exists()
    assert is_first_process("s3://bucket/run") is True
    assert is_framework_version_supported(FRAMEWORK.PYTORCH) is True
    assert is_framework_version_supported(FRAMEWORK.XGBOOST) is True


def test_sagemaker_simulator_sets_and_restores_the_job_environment(tmp_path, monkeypatch):
    tb_config = Path(constants.DEFAULT_SAGEMAKER_TENSORBOARD_PATH)
    if tb_config.exists() or Path(constants.DEFAULT_SAGEMAKER_OUTDIR).exists():
        pytest.skip("this machine has a real SageMaker configuration; not touching it")
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    monkeypatch.setenv(constants.CONFIG_FILE_PATH_ENV_STR, "/before.json")
    made = [p for p in (Path("/opt/ml/input/config"), Path("/opt/ml/input"), Path("/opt/ml"))
            if not p.exists()]
    config = tmp_path / "zcc.json"
    try:
        with SagemakerSimulator(json_config_path=str(config), tensorboard_dir="/tmp/tb-sim",
                                json_file_contents=json.dumps(_DOC)) as sim:
            assert os.environ[constants.CONFIG_FILE_PATH_ENV_STR] == str(config)
            assert json.loads(config.read_text()) == _DOC
            assert json_config.get_tensorboard_dir_from_json_config() == sim.tensorboard_dir
            from smdebug.core.sagemaker_utils import is_sagemaker_job

            assert is_sagemaker_job()
            params = json_config.collect_hook_config_params(_DOC)
            # the document's own values; a hook made on SageMaker uses the TensorBoard config
            assert (params["export_tensorboard"], params["tensorboard_dir"]) == (
                True, "/tmp/tensorboard")
            assert get_tensorboard_dir(True, sim.tensorboard_dir, "/o") == "/tmp/tb-sim"
        assert os.environ[constants.CONFIG_FILE_PATH_ENV_STR] == "/before.json"
        assert "TRAINING_JOB_NAME" not in os.environ
        assert not config.exists() and not tb_config.exists()
    finally:
        for p in made:
            shutil.rmtree(p, ignore_errors=True)


def test_hook_utils(tmp_path, s3_endpoint, s3_bucket):
    assert get_tensorboard_dir(True, None, "/o") == "/o/tensorboard"
    assert get_tensorboard_dir(False, "~/tb", "/o") == os.path.expanduser("~/tb")
    assert get_tensorboard_dir(False, None, "/o") is None
    assert verify_and_get_out_dir("~/fresh-run") == os.path.expanduser("~/fresh-run")
    (tmp_path / "training_job_end.ts").touch()
    with pytest.raises(RuntimeError, match="finished training run"):
        verify_and_get_out_dir(str(tmp_path))
    with pytest.raises(RuntimeError):
        verify_and_get_out_dir(None)
    uri = f"s3://{s3_bucket}/job"
    assert verify_and_get_out_dir(uri) == uri
    assert verify_and_get_out_dir("s3://no-such-bucket-compat-test/job")
    s3_endpoint.client().put_object(Bucket=s3_bucket, Key="job/training_job_end.ts", Body=b"")
    with pytest.raises(RuntimeError, match="finished training run"):
        verify_and_get_out_dir(uri)


def test_reductions():
    a = np.array([[1.0, -2.0], [3.0, 4.0]])
    assert get_numpy_reduction("max", a, abs=False) == 4.0
    assert get_numpy_reduction("min", a, abs=True) == 1.0
    assert get_numpy_reduction("l1", a) == 10.0  # the flattened norm, as the hooks save it
    assert get_numpy_reduction("variance", a) == pytest.approx(np.var(a, ddof=1))
    assert get_basic_numpy_reduction("median", a) is None
    with pytest.raises(ValueError, match="median"):
        get_numpy_reduction("median", a)
    name = get_reduction_tensor_name("dense/kernel:0", "mean", abs=True)
    assert name == "smdebug/reductions/abs_mean/dense/kernel"
    assert get_reduction_tensor_name("k:0", "max", False, remove_colon_index=False) \
        == "smdebug/reductions/max/k:0"
    assert reverse_reduction_tensor_name(name) == ("dense/kernel", "mean", True)

    from smdebug.pytorch.utils import get_reduction_of_data, is_current_version_supported

    t = torch.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert float(get_reduction_of_data("variance", t, "t")) == pytest.approx(np.var(a, ddof=1))
    assert float(get_reduction_of_data("l2", t, "t", abs=True)) == pytest.approx(30 ** 0.5)
    assert float(get_reduction_of_data("median", t, "t")) == float(torch.median(t))
    assert is_current_version_supported("2.1.0") and not is_current_version_supported("1.13.1")


def test_config_validator(monkeypatch):
    from smdebug.core.config_validator import ConfigValidator

    reset_config_validator()
    try:
        assert get_config_validator(FRAMEWORK.PYTORCH).validate_training_job() is True
        assert get_config_validator(FRAMEWORK.XGBOOST) is get_config_validator(FRAMEWORK.PYTORCH)
        monkeypatch.setenv("USE_SMDEBUG", "false")
        assert not ConfigValidator(FRAMEWORK.PYTORCH).validate_training_job()
    finally:
        reset_config_validator()


def test_core_singleton_utils(tmp_path):
    from smdebug.core.singleton_utils import del_hook, get_hook, set_hook

    with pytest.raises(SMDebugTypeError):
        set_hook("not a hook")
    hook = lite_pt.Hook(out_dir=str(tmp_path / "run"), dry_run=True)
    set_hook(hook)
    assert get_hook(json_config_path=None, hook_class=None, create_if_not_exists=False) is hook
    assert lite_pt.get_hook() is hook
    with pytest.raises(ValueError):
        get_hook(json_config_path=None, hook_class=None, create_if_not_exists=True)
    del_hook()
    assert lite_pt.get_hook() is None
