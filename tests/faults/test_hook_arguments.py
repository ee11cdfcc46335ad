"""Wrong-typed or impossible arguments to the public constructors are refused at once, with an
exception of smdebug's classes (ArgumentTypeError is a TypeError and a SMDebugValueError;
SMDebugValueError is a ValueError) whose message names the argument and the value. Everything
smdebug 1.0.34 accepted is still accepted (cross-checked in the reference venv)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from refvenv import ref_python, run_ref

import smdebug_lite as smd
from smdebug_lite.config.arguments import ArgumentTypeError
from smdebug_lite.config.collection import Collection
from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.config.save_config import SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugRuntimeError, SMDebugTypeError, SMDebugValueError
from smdebug_lite.hooks.singleton import current_hook, del_hook


def _hook_class(framework: str) -> type:
    if framework == "pytorch":
        pytest.importorskip("torch")
        from smdebug_lite.pytorch import Hook
    elif framework == "keras":
        pytest.importorskip("tensorflow")
        from smdebug_lite.tensorflow import KerasHook as Hook
    else:
        pytest.importorskip("xgboost")
        from smdebug_lite.xgboost import Hook
    return Hook


FRAMEWORKS = ["pytorch", "keras", "xgboost"]

# (argument, value, exception class, text the message must contain besides the argument name)
BAD_ARGUMENTS: list[tuple[str, Any, type, str]] = [
    ("out_dir", 5, SMDebugTypeError, "5"),
    ("out_dir", b"/tmp/x", SMDebugTypeError, "/tmp/x"),
    ("out_dir", "", SMDebugValueError, "empty"),
    ("out_dir", "/tmp/a\0b", SMDebugValueError, "NUL"),
    ("out_dir", "s3://", SMDebugValueError, "bucket"),
    ("include_workers", 1, SMDebugTypeError, "'one' or 'all'"),
    ("include_workers", "every", SMDebugValueError, "'every'"),
    ("reduction_config", "mean", SMDebugTypeError, "ReductionConfig"),
    ("include_collections", 5, SMDebugTypeError, "collection name"),
    ("include_collections", [1, 2], SMDebugTypeError, "contains 1"),
    ("include_collections", ["weights", {"a": 1}], SMDebugTypeError, "contains {'a': 1}"),
    ("include_collections", ["weights", " "], SMDebugValueError, "empty names"),
    ("include_regex", 5, SMDebugTypeError, "regular expression"),
    ("include_regex", ["ok", "("], SMDebugValueError, "'('"),
    ("save_config", 5, SMDebugTypeError, "SaveConfig"),
    ("save_config", "10", SMDebugTypeError, "SaveConfig"),
    ("save_config", {"save_interval": "ten"}, SMDebugValueError, "save_interval='ten'"),
    ("save_config", {"save_interval": [1]}, SMDebugTypeError, "save_interval=[1]"),
    ("save_config", {"TRAIN": 5}, SMDebugTypeError, "TRAIN"),
    ("save_config", {"bogus": 1}, SMDebugValueError, "'bogus'"),
    ("tensorboard_dir", 5, SMDebugTypeError, "5"),
    ("dry_run", "maybe", SMDebugValueError, "'maybe'"),
    ("save_all", [True, False], SMDebugTypeError, "a list holding one bool"),
    ("save_all", ["maybe"], SMDebugTypeError, "['maybe']"),
    ("export_tensorboard", {"on": 1}, SMDebugTypeError, "a bool"),
]


pytestmark = pytest.mark.usefixtures("no_current_hook")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(("argument", "value", "error", "text"), BAD_ARGUMENTS,
                         ids=[f"{a}={v!r}"[:40] for a, v, _, _ in BAD_ARGUMENTS])
def test_hook_refuses_a_bad_argument(tmp_path, framework, argument, value, error, text):
    hook_class = _hook_class(framework)
    kwargs = {"out_dir": str(tmp_path / "run"), argument: value}
    with pytest.raises(error) as info:
        hook_class(**kwargs)
    message = str(info.value)
    assert message.startswith(argument) and text in message, message
    if issubclass(error, SMDebugTypeError):
        # Handlers written for smdebug (TypeError) and for earlier smdebug-lite (ValueError).
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, ValueError)
    assert current_hook() is None  # nothing half-built was registered
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_missing_out_dir_is_a_runtime_error_as_in_smdebug(framework):
    with pytest.raises(SMDebugRuntimeError, match="out_dir is a required argument"):
        _hook_class(framework)(out_dir=None)


def test_xgboost_only_arguments(tmp_path):
    hook_class = _hook_class("xgboost")
    with pytest.raises(SMDebugTypeError, match="hyperparameters=5"):
        hook_class(out_dir=str(tmp_path / "a"), hyperparameters=5)
    with pytest.raises(SMDebugTypeError, match="reduction_config='mean'"):
        hook_class(out_dir=str(tmp_path / "b"), reduction_config="mean")
    assert current_hook() is None


# What smdebug 1.0.34 accepted, and smdebug-lite must keep accepting.
ACCEPTED = {
    "nested_collections": {"include_collections": [["weights"], "losses"]},
    "tuple_collections": {"include_collections": ("weights", "gradients")},
    "set_collections": {"include_collections": {"weights"}},
    "regex_list": {"include_regex": ["fc.*", "relu"]},
    "workers_all": {"include_workers": "all"},
    "workers_one": {"include_workers": "one"},
    "mode_dict": {"save_config": {"TRAIN": {"save_interval": 3}}},
    "dry_run": {"dry_run": True},
    "save_all_int": {"save_all": 1},
    "save_all_list": {"save_all": ["true"]},  # (smdebug's tests/tensorflow2/test_embedding_grad)
    "tensorboard": {"export_tensorboard": True, "tensorboard_dir": "TB"},
}

REF_ACCEPTS = """
import json, logging, os, sys, tempfile
logging.disable(logging.CRITICAL)
from smdebug.pytorch import Hook
verdicts = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    d = tempfile.mkdtemp()
    kwargs = {k: (set(v) if k == "include_collections" and name.startswith("set") else
                  tuple(v) if k == "include_collections" and name.startswith("tuple") else v)
              for k, v in kwargs.items()}
    if "tensorboard_dir" in kwargs:
        kwargs["tensorboard_dir"] = os.path.join(d, "tb")
    try:
        Hook(out_dir=os.path.join(d, "run"), **kwargs)
        verdicts[name] = "ok"
    except Exception as e:
        verdicts[name] = type(e).__name__
print("@@" + json.dumps(verdicts))
"""


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_what_smdebug_accepted_is_accepted(tmp_path, framework):
    hook_class = _hook_class(framework)
    for name, kwargs in ACCEPTED.items():
        kwargs = {k: (str(tmp_path / name / "tb") if v == "TB" else v) for k, v in kwargs.items()}
        hook = hook_class(out_dir=str(tmp_path / name / "run"), **kwargs)
        hook.close()
    hook = hook_class(out_dir=tmp_path / "pathlike")  # os.PathLike too (smdebug: str only)
    assert hook.out_dir == str(tmp_path / "pathlike")
    hook.close()


@pytest.mark.reference
def test_smdebug_accepted_the_same_arguments():
    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    as_json = {n: {k: (sorted(v) if isinstance(v, (set, tuple)) else v) for k, v in kw.items()}
               for n, kw in ACCEPTED.items()}
    proc = run_ref(REF_ACCEPTS, json.dumps(as_json), timeout=300)
    verdicts = json.loads(proc.stdout.split("@@")[-1])
    assert verdicts == dict.fromkeys(ACCEPTED, "ok"), verdicts


def test_flags_read_text_as_booleans(tmp_path):
    hook_class = _hook_class("pytorch")
    hook = hook_class(out_dir=str(tmp_path / "run"), dry_run="false", save_all="TRUE",
                      include_workers=" All ")
    assert hook.dry_run is False and hook.save_all is True and hook.include_workers == "all"
    hook.close()


# -- SaveConfig, SaveConfigMode, ReductionConfig, Collection -------------------------------------


@pytest.mark.parametrize(("make", "error", "text"), [
    (lambda: SaveConfigMode(save_interval=[1]), SMDebugTypeError, "save_interval=[1]"),
    (lambda: SaveConfigMode(save_interval=True), SMDebugTypeError, "save_interval=True"),
    (lambda: SaveConfigMode(save_interval="ten"), SMDebugValueError, "save_interval='ten'"),
    (lambda: SaveConfigMode(save_interval=2.5), SMDebugValueError, "save_interval=2.5"),
    (lambda: SaveConfigMode(start_step={"a": 1}), SMDebugTypeError, "start_step"),
    (lambda: SaveConfigMode(save_steps=5), SMDebugTypeError, "save_steps=5"),
    (lambda: SaveConfigMode(save_steps=[1, None]), SMDebugTypeError, "save_steps=[1, None]"),
    (lambda: SaveConfig(mode_save_configs=5), SMDebugTypeError, "mode_save_configs=5"),
    (lambda: SaveConfig({"TRAIN": "often"}), SMDebugTypeError, "mode_save_configs[TRAIN]"),
    (lambda: SaveConfig.parse([1]), SMDebugTypeError, "save_config=[1]"),
    (lambda: ReductionConfig(reductions=5), SMDebugTypeError, "reductions=5"),
    (lambda: ReductionConfig(reductions=["mean", 3]), SMDebugTypeError, "reductions"),
    (lambda: ReductionConfig(norms=["l3"]), SMDebugValueError, "'l3'"),
    (lambda: ReductionConfig(save_raw_tensor=[1]), SMDebugTypeError, "save_raw_tensor=[1]"),
    (lambda: ReductionConfig(save_shape="maybe"), SMDebugValueError, "save_shape='maybe'"),
    (lambda: ReductionConfig.from_dict("mean"), SMDebugTypeError, "reduction_config='mean'"),
    (lambda: Collection(5), SMDebugTypeError, "name=5"),
    (lambda: Collection("c").include(5), SMDebugTypeError, "include_regex=5"),
])
def test_config_constructors_refuse_bad_arguments(make, error, text):
    with pytest.raises(error) as info:
        make()
    assert text in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError)  # (as these checks raised before)


def test_config_constructors_accept_what_smdebug_did():
    assert SaveConfigMode(save_interval="10").save_interval == 10
    assert SaveConfigMode(save_interval=10.0).save_interval == 10
    assert SaveConfig(save_steps=[1, 2]).get_save_config("TRAIN").save_steps == [1, 2]
    assert ReductionConfig(reductions=["mean"], save_raw_tensor=True).save_raw_tensor is True
    assert isinstance(SaveConfig.parse({smd.modes.TRAIN: SaveConfigMode(save_interval=2)}),
                      SaveConfig)


# -- built-in rules --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from smdebug_lite.pytorch import Hook
    from smdebug_lite.trials import create_trial

    out = tmp_path_factory.mktemp("rules") / "run"
    model = torch.nn.Linear(3, 1)
    loss_fn = torch.nn.MSELoss()
    hook = Hook(out_dir=str(out), save_config=SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for _ in range(2):
        loss_fn(model(torch.ones(2, 3)), torch.zeros(2, 1)).backward()
    hook.close()
    del_hook()
    return create_trial(str(out))


@pytest.mark.parametrize(("rule", "params", "error", "text"), [
    ("VanishingGradient", {"threshold": {"a": 1}}, SMDebugTypeError, "threshold={'a': 1}"),
    ("VanishingGradient", {"threshold": "tiny"}, SMDebugValueError, "threshold='tiny'"),
    ("VanishingGradient", {"threshold": [1e-7]}, SMDebugTypeError, "threshold=[1e-07]"),
    ("ExplodingTensor", {"only_nan": [1]}, SMDebugTypeError, "only_nan=[1]"),
    ("ExplodingTensor", {"collection_names": b"weights"}, SMDebugTypeError, "collection_names"),
    ("LossNotDecreasing", {"num_steps": "1.5"}, SMDebugValueError, "num_steps='1.5'"),
    ("LossNotDecreasing", {"num_steps": object()}, SMDebugTypeError, "num_steps"),
    ("Confusion", {"labels": object()}, SMDebugTypeError, "labels"),
    ("Confusion", {"labels_collection": {"labels": 1}}, SMDebugTypeError, "labels_collection"),
    ("StalledTrainingRule", {"threshold": "soon"}, SMDebugValueError, "threshold='soon'"),
    ("WeightUpdateRatio", {"large_threshold": float("nan")}, SMDebugValueError, "nan"),
])
def test_builtin_rules_name_the_rule_parameter_and_value(trial, rule, params, error, text):
    from smdebug_lite.rules.builtin import get_builtin_rule

    with pytest.raises(error) as info:
        get_builtin_rule(rule)(trial, **params)
    message = str(info.value)
    assert message.startswith(f"{rule}: parameter ") and text in message, message
    assert isinstance(info.value, ValueError)
    if error is SMDebugTypeError:
        assert isinstance(info.value, (TypeError, ArgumentTypeError))


def test_builtin_rules_take_strings_and_numbers(trial):
    from smdebug_lite.rules.builtin import get_builtin_rule

    assert get_builtin_rule("VanishingGradient")(trial, threshold="1e-6").threshold == 1e-6
    assert get_builtin_rule("VanishingGradient")(trial, threshold=1e-6).threshold == 1e-6
    rule = get_builtin_rule("ExplodingTensor")(trial, collection_names=["weights", "gradients"],
                                              only_nan=True)
    assert rule.only_nan is True
