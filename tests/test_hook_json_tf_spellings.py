"""``save_all`` as a list of one (``["true"]``, as smdebug's own TensorFlow tests passed it), in
the hook JSON and in the hook constructor, and the other value spellings smdebug's TF test
configurations use; anything else is refused naming the key, the value and what is expected."""

from __future__ import annotations

import json

import pytest

from smdebug_lite import modes
from smdebug_lite.config.arguments import ArgumentTypeError
from smdebug_lite.config.hook_json import HookConfigError, parse_hook_config
from smdebug_lite.hooks.singleton import del_hook


def _write(tmp_path, doc: dict) -> str:
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture(autouse=True)
def _no_hook():
    del_hook()
    yield
    del_hook()


@pytest.mark.parametrize(("value", "expected"), [
    (["true"], True), (["True"], True), ([True], True), ([1], True),
    (["false"], False), ([False], False), ([], False), (True, True), ("false", False),
    # smdebug compared the value with True/False, so a JSON 1.0 or 0.0 passed
    (1.0, True), (0.0, False), ([1.0], True), (1, True), (0, False),
])
def test_save_all_accepts_a_list_of_one(tmp_path, value, expected):
    doc = {"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_all": value}}
    assert parse_hook_config(_write(tmp_path, doc)).save_all is expected


@pytest.mark.parametrize("value", [["maybe"], [True, False], [["true"]], [None], {"on": 1},
                                   "maybe", 2, 2.0, 0.5, -1.0, [0.5]])
def test_save_all_refuses_anything_else_naming_key_and_value(tmp_path, value):
    doc = {"HookParameters": {"save_all": value}}
    path = _write(tmp_path, doc)
    with pytest.raises(HookConfigError) as info:
        parse_hook_config(path)
    message = str(info.value)
    assert path in message and "HookParameters.save_all" in message
    assert repr(value) in message and "boolean" in message and "list holding one" in message
    assert info.value.key == "HookParameters.save_all" and info.value.value == value


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("export_tensorboard", 1.0, True), ("export_tensorboard", 0.0, False),
    ("dry_run", 1.0, True),
])
def test_other_flags_take_a_float_zero_or_one(tmp_path, key, value, expected):
    doc = {"LocalPath": str(tmp_path / "out"), "HookParameters": {key: value}}
    assert getattr(parse_hook_config(_write(tmp_path, doc)), key) is expected


@pytest.mark.parametrize("key", ["export_tensorboard", "dry_run"])
def test_other_flags_refuse_other_floats(tmp_path, key):
    with pytest.raises(HookConfigError, match=rf"HookParameters\.{key}=0\.5"):
        parse_hook_config(_write(tmp_path, {"HookParameters": {key: 0.5}}))


def test_other_flags_keep_refusing_lists(tmp_path):
    doc = {"HookParameters": {"export_tensorboard": ["true"]}}
    with pytest.raises(HookConfigError, match=r"HookParameters\.export_tensorboard=\['true'\]"):
        parse_hook_config(_write(tmp_path, doc))


def test_spellings_of_smdebugs_tf_test_configurations(tmp_path):
    """String numbers, comma lists with spaces, mode prefixes, string booleans, null maps."""
    doc = {
        "S3OutputPath": "s3://bucket/prefix",
        "LocalPath": str(tmp_path / "out"),
        "HookParameters": {
            "save_all": "false",
            "include_workers": "one",
            "save_interval": "4",
            "eval.save_interval": 3,
            "global.save_interval": "5",
            "train.save_steps": "0, 2",
            "start_step": 1,
            "end_step": "50",
            "include_regex": "dense*, conv2d",
            "reductions": "max, mean, abs_l2_norm",
            "save_shape": "true",
            "export_tensorboard": "true",
            "tensorboard_dir": str(tmp_path / "tb"),
        },
        "CollectionConfigurations": [
            {"CollectionName": "weights"},
            {"CollectionName": "gradients", "CollectionParameters": None},
            {"CollectionName": "custom", "CollectionParameters": {
                "include_regex": "relu*,input_*", "save_histogram": "false",
                "eval.save_interval": "2", "save_steps": "1,3"}},
        ],
    }
    s = parse_hook_config(_write(tmp_path, doc))
    assert s.save_all is False and s.include_workers == "one"
    assert s.include_regex == ["dense*", "conv2d"]
    assert s.include_collections == ["weights", "gradients", "custom"]
    assert s.export_tensorboard is True and s.tensorboard_dir == str(tmp_path / "tb")
    rc = s.reduction_config
    assert rc.reductions == ["max", "mean"] and rc.abs_norms == ["l2"] and rc.save_shape
    sc = s.save_config
    assert sc.get_save_config(modes.TRAIN).save_steps == [0, 2]
    assert sc.get_save_config(modes.EVAL).save_interval == 3
    assert sc.get_save_config(modes.GLOBAL).save_interval == 5
    assert sc.get_save_config(modes.PREDICT).save_interval == 4
    assert sc.get_save_config(modes.PREDICT).start_step == 1
    assert sc.get_save_config(modes.PREDICT).end_step == 50
    custom = s.collection_settings[2]
    assert custom.include_regex == ["relu*", "input_*"] and custom.save_histogram is False
    assert custom.save_config.get_save_config(modes.EVAL).save_interval == 2
    assert custom.save_config.get_save_config(modes.TRAIN).save_steps == [1, 3]


@pytest.mark.parametrize("value", [["true"], 1.0, "True"])
def test_keras_hook_from_json_with_save_all_list(tmp_path, value):
    tf = pytest.importorskip("tensorflow")  # noqa: F841
    from smdebug_lite.tensorflow import KerasHook

    doc = {"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_all": value}}
    hook = KerasHook.create_from_json_file(_write(tmp_path, doc))
    assert hook.save_all is True
    hook.close()


@pytest.mark.parametrize(("value", "expected"), [(["true"], True), (["false"], False),
                                                  ([], False), ([1], True)])
def test_keras_hook_constructor_takes_save_all_as_a_list_of_one(tmp_path, value, expected):
    pytest.importorskip("tensorflow")
    from smdebug_lite.tensorflow import KerasHook

    hook = KerasHook(out_dir=str(tmp_path / "run"), save_all=value)
    assert hook.save_all is expected
    hook.close()


@pytest.mark.parametrize("value", [[True, False], ["maybe"], [None]])
def test_keras_hook_constructor_refuses_other_lists(tmp_path, value):
    pytest.importorskip("tensorflow")
    from smdebug_lite.tensorflow import KerasHook

    with pytest.raises(ArgumentTypeError) as info:
        KerasHook(out_dir=str(tmp_path / "run"), save_all=value)
    message = str(info.value)
    assert message.startswith("save_all=") and repr(value) in message
    assert "a list holding one bool" in message
