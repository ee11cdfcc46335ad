"""SaveConfig / SaveConfigMode: the user docs' examples, smdebug's semantics, JSON, bad input."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import smdebug_lite as smd
from smdebug_lite import modes
from smdebug_lite.config.save_config import DEFAULT_SAVE_INTERVAL, SaveConfig, SaveConfigMode
from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.modes import ModeKeys


def saved(cfg, mode=modes.TRAIN, upto=1201):
    return [s for s in range(upto) if cfg.should_save_step(mode, s)]


# -- the documented examples -------------------------------------------------------------------


def test_doc_constructor_with_every_argument():
    cfg = smd.SaveConfig(
        mode_save_configs=None, save_interval=100, start_step=0, end_step=None, save_steps=None
    )
    for mode in modes.ALLOWED_MODES:
        assert cfg.get_save_config(mode) == SaveConfigMode(save_interval=100)
    assert saved(cfg, upto=301) == [0, 100, 200, 300]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [0, 500, 1000]),
        ({"save_interval": 1}, list(range(1201))),
        ({"save_interval": 100, "end_step": 200}, [0, 100]),
        ({"save_interval": 100, "end_step": 201}, [0, 100, 200]),
        ({"save_interval": 100, "start_step": 150}, list(range(200, 1201, 100))),
        ({"save_steps": [3, 7]}, [0, 3, 7, 500, 1000]),
    ],
)
def test_doc_examples(kwargs, expected):
    cfg = smd.SaveConfig(**kwargs)
    for mode in modes.ALLOWED_MODES:
        assert saved(cfg, mode) == expected


def test_doc_per_mode_example():
    cfg = smd.SaveConfig(
        mode_save_configs={
            smd.modes.TRAIN: smd.SaveConfigMode(save_interval=1),
            smd.modes.EVAL: smd.SaveConfigMode(save_interval=2),
            smd.modes.PREDICT: smd.SaveConfigMode(save_interval=3),
            smd.modes.GLOBAL: smd.SaveConfigMode(save_interval=4),
        }
    )
    assert saved(cfg, modes.TRAIN, 7) == [0, 1, 2, 3, 4, 5, 6]
    assert saved(cfg, modes.EVAL, 7) == [0, 2, 4, 6]
    assert saved(cfg, modes.PREDICT, 7) == [0, 3, 6]
    assert saved(cfg, modes.GLOBAL, 9) == [0, 4, 8]
    assert cfg.is_complete()


def test_unspecified_mode_uses_the_default_schedule():
    cfg = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=1)})
    assert cfg.get_mode_config(modes.EVAL) is None  # still "inherit" for collections
    assert cfg.missing_modes() == [modes.EVAL, modes.PREDICT, modes.GLOBAL]
    assert cfg.get_save_config(modes.EVAL) == SaveConfigMode()
    # smdebug raised "not ready" here (spec 10.8); the docs promise the default schedule
    assert saved(cfg, modes.EVAL) == [0, 500, 1000]
    assert saved(cfg, modes.TRAIN, 3) == [0, 1, 2]


def test_unspecified_params_take_defaults():
    m = SaveConfigMode(save_interval=7)
    assert (m.save_interval, m.start_step, m.end_step, m.save_steps) == (7, 0, None, [])
    m = SaveConfigMode(end_step=9)
    assert (m.save_interval, m.start_step, m.end_step, m.save_steps) == (500, 0, 9, [])
    assert DEFAULT_SAVE_INTERVAL == 500


def test_generic_arguments_fill_modes_not_given():
    cfg = SaveConfig({"train": SaveConfigMode(save_interval=1)}, save_interval=10)
    assert cfg.get_save_config(modes.TRAIN).save_interval == 1
    for mode in (modes.EVAL, modes.PREDICT, modes.GLOBAL):
        assert cfg.get_mode_config(mode) == SaveConfigMode(save_interval=10)


# -- semantics ---------------------------------------------------------------------------------


def test_save_steps_is_a_union_with_the_interval():
    m = SaveConfigMode(save_steps=[1, 2])
    assert [s for s in range(1001) if m.should_save_step(s)] == [0, 1, 2, 500, 1000]


def test_end_step_is_exclusive_and_zero_disables():
    m = SaveConfigMode(save_interval=10, end_step=30)
    assert [s for s in range(100) if m.should_save_step(s)] == [0, 10, 20]
    off = SaveConfigMode(end_step=0)
    assert not any(off.should_save_step(s) for s in range(2000))


def test_save_steps_are_not_limited_by_start_and_end():
    m = SaveConfigMode(save_interval=5, start_step=10, end_step=20, save_steps=[3, 25])
    assert [s for s in range(40) if m.should_save_step(s)] == [3, 10, 15, 25]


def test_start_step_does_not_shift_the_modulo():
    m = SaveConfigMode(save_interval=100, start_step=150)
    assert not m.should_save_step(150)
    assert not m.should_save_step(250)
    assert m.should_save_step(200)


def test_strings_and_numpy_integers_are_converted():
    m = SaveConfigMode(save_interval="10", start_step=" 5 ", end_step="50", save_steps=["7", 8])
    assert (m.save_interval, m.start_step, m.end_step, m.save_steps) == (10, 5, 50, [7, 8])
    m = SaveConfigMode(save_interval=np.int64(3), save_steps=np.array([1, 2]).tolist())
    assert m.save_interval == 3 and isinstance(m.save_interval, int)
    assert SaveConfigMode(save_steps="1, 2,3").save_steps == [1, 2, 3]
    assert SaveConfigMode(save_steps=(4, 5)).save_steps == [4, 5]


def test_default_interval_override_for_xgboost():
    assert SaveConfigMode(save_interval=10).save_interval == 10
    m = SaveConfigMode.from_dict({}, default_values={"save_interval": 10})
    assert m == SaveConfigMode(save_interval=10)
    m = SaveConfigMode.from_dict({"save_interval": 3}, default_values={"save_interval": 10})
    assert m.save_interval == 3
    cfg = SaveConfig.from_dict({"TRAIN": {}, "EVAL": None}, default_values={"save_interval": 10})
    assert cfg.get_mode_config(modes.TRAIN).save_interval == 10
    assert cfg.get_mode_config(modes.EVAL) is None


# -- merging -----------------------------------------------------------------------------------


def test_merge_default_fills_only_missing_modes():
    coll = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=1)})
    hook = SaveConfig(save_interval=7)
    coll.merge_default_save_config(hook)
    assert coll.get_mode_config(modes.TRAIN).save_interval == 1
    for mode in (modes.EVAL, modes.PREDICT, modes.GLOBAL):
        assert coll.get_mode_config(mode).save_interval == 7
    assert coll.is_complete()


def test_merge_with_partial_default_uses_fallback_or_defaults():
    coll = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=1)})
    hook = SaveConfig({modes.EVAL: SaveConfigMode(save_interval=2)})
    coll.merge_default_save_config(hook)
    assert coll.get_mode_config(modes.EVAL).save_interval == 2
    assert coll.get_mode_config(modes.PREDICT) == SaveConfigMode()
    other = SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=1)})
    other.merge_default_save_config(None, fallback=SaveConfigMode(save_interval=10))
    assert other.get_mode_config(modes.GLOBAL).save_interval == 10
    third = SaveConfig({})
    third.merge_default_save_config(SaveConfigMode(save_interval=4))
    assert all(c.save_interval == 4 for c in third.mode_save_configs.values())


# -- parse / JSON ------------------------------------------------------------------------------


def test_parse_accepts_the_four_forms():
    assert SaveConfig.parse(None) == SaveConfig()
    cfg = SaveConfig(save_interval=3)
    assert SaveConfig.parse(cfg) is cfg
    assert SaveConfig.parse(SaveConfigMode(save_interval=3)) == cfg
    assert (
        SaveConfig.parse({modes.TRAIN: SaveConfigMode(save_interval=3)}).get_mode_config(modes.EVAL)
        is None
    )
    assert SaveConfig.parse({"save_interval": 3}) == cfg
    assert (
        SaveConfig.parse({"TRAIN": {"save_interval": 2}}).get_save_config("train").save_interval
        == 2
    )


def test_json_form_and_key_order():
    m = SaveConfigMode(save_interval=3, start_step=2, save_steps=[4])
    assert list(m.to_json_dict()) == ["save_interval", "save_steps", "start_step", "end_step"]
    assert m.to_json_dict() == {
        "save_interval": 3,
        "save_steps": [4],
        "start_step": 2,
        "end_step": None,
    }
    cfg = SaveConfig({modes.EVAL: m, modes.TRAIN: SaveConfigMode()})
    d = cfg.to_json_dict()
    assert list(d) == ["TRAIN", "EVAL", "PREDICT", "GLOBAL"]
    assert d["PREDICT"] is None and d["EVAL"] == m.to_json_dict()
    assert json.loads(cfg.to_json()) == d


@pytest.mark.parametrize(
    "cfg",
    [
        SaveConfig(),
        SaveConfig(save_interval=3, start_step=2, end_step=40, save_steps=[1, 5]),
        SaveConfig({modes.TRAIN: SaveConfigMode(save_interval=1), modes.GLOBAL: None}),
        SaveConfig({}),
    ],
)
def test_json_round_trip(cfg):
    assert SaveConfig.from_json(cfg.to_json()) == cfg
    assert SaveConfig.from_dict(cfg.to_json_dict()) == cfg
    assert SaveConfig.from_dict(json.loads(cfg.to_json())).to_json() == cfg.to_json()


def test_from_dict_accepts_modekeys_ints_and_any_case():
    a = SaveConfig.from_dict({ModeKeys.TRAIN: {"save_interval": 2}})
    b = SaveConfig.from_dict({"train": {"save_interval": 2}})
    c = SaveConfig.from_dict({1: SaveConfigMode(save_interval=2)})
    assert a == b == c
    assert a.get_mode_config(modes.EVAL) is None


def test_equality_copy_and_repr():
    a = SaveConfig(save_interval=3)
    b = a.copy()
    assert a == b and a is not b
    b.get_mode_config(modes.TRAIN).save_interval = 4
    assert a != b
    assert SaveConfigMode(save_steps=[1]) != SaveConfigMode()
    assert eval(repr(SaveConfigMode(3, 1, 9, [2]))) == SaveConfigMode(3, 1, 9, [2])
    for cfg in (SaveConfig(save_interval=3), SaveConfig({modes.TRAIN: SaveConfigMode(1)})):
        assert eval(repr(cfg)) == cfg
    assert (SaveConfig() == 5) is False


# -- invalid input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (lambda: SaveConfigMode(save_interval=0), ["save_interval", "0"]),
        (lambda: SaveConfigMode(save_interval=-5), ["save_interval", "-5"]),
        (lambda: SaveConfigMode(save_interval="abc"), ["save_interval", "abc"]),
        (lambda: SaveConfigMode(save_interval=1.5), ["save_interval", "1.5"]),
        (lambda: SaveConfigMode(save_interval=True), ["save_interval", "True"]),
        (lambda: SaveConfigMode(start_step=-1), ["start_step", "-1"]),
        (lambda: SaveConfigMode(end_step=-2), ["end_step", "-2"]),
        (lambda: SaveConfigMode(start_step=10, end_step=5), ["start_step=10", "end_step=5"]),
        (lambda: SaveConfigMode(save_steps=[1.5]), ["save_steps", "1.5"]),
        (lambda: SaveConfigMode(save_steps=["x"]), ["save_steps", "'x'"]),
        (lambda: SaveConfigMode(save_steps="1,x"), ["save_steps", "'x'"]),
        (lambda: SaveConfigMode(save_steps=[-3]), ["save_steps", "-3"]),
        (lambda: SaveConfigMode(save_steps=5), ["save_steps", "5"]),
        (lambda: SaveConfig(save_interval=0), ["save_interval", "0"]),
        (lambda: SaveConfig(save_steps=[3, 1.5]), ["save_steps", "1.5"]),
        (lambda: SaveConfigMode.from_dict({"save_intervl": 3}), ["save_intervl", "3"]),
        (lambda: SaveConfigMode.from_dict({"save_interval": 0}), ["save_interval", "0"]),
        (lambda: SaveConfig.from_dict({"TRAIN": {"every": 2}}), ["every", "2"]),
        (lambda: SaveConfig.from_dict({"TRAINING": {"save_interval": 2}}), ["TRAINING"]),
        (lambda: SaveConfig.from_dict({"save_interval": 2, "TRAIN": {}}), ["TRAIN"]),
        (lambda: SaveConfig({"TEST": SaveConfigMode()}), ["mode_save_configs", "TEST"]),
        (lambda: SaveConfig({7: SaveConfigMode()}), ["mode_save_configs", "7"]),
        (lambda: SaveConfig({modes.TRAIN: 5}), ["TRAIN", "5"]),
        (lambda: SaveConfig(mode_save_configs=[1, 2]), ["mode_save_configs", "[1, 2]"]),
        (lambda: SaveConfig().get_save_config("test"), ["mode", "test"]),
        (lambda: SaveConfig().should_save_step(9, 0), ["mode", "9"]),
        (lambda: SaveConfig.parse(42), ["save_config", "42"]),
        (lambda: SaveConfig.from_dict([1]), ["save_config", "[1]"]),
    ],
)
def test_invalid_input_names_argument_and_value(build, needles):
    with pytest.raises(SMDebugValueError) as info:
        build()
    assert isinstance(info.value, ValueError)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


REF_SCHEDULES = r"""
import json, sys
from smdebug import SaveConfig, modes
out = []
for kwargs in json.loads(sys.argv[1]):
    cfg = SaveConfig(**kwargs)
    out.append([s for s in range(1201) if cfg.should_save_step(modes.TRAIN, s)])
    out.append(cfg.to_json_dict())
print(json.dumps(out))
"""

REF_CASES = [
    {},
    {"save_interval": 1},
    {"save_interval": 100, "end_step": 200},
    {"save_interval": 100, "end_step": 201},
    {"save_interval": 100, "start_step": 150},
    {"save_steps": [3, 7]},
    {"save_interval": 7, "start_step": 20, "end_step": 90, "save_steps": [1, 95]},
    {"save_interval": "10", "start_step": "5"},
    {"end_step": 0},
]


@pytest.mark.reference
def test_same_schedules_and_json_as_smdebug_1_0_34():
    from refvenv import ref_python, run_ref

    py, reason = ref_python()
    if py is None:
        pytest.skip(reason)
    proc = run_ref(REF_SCHEDULES, json.dumps(REF_CASES))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = json.loads(proc.stdout.strip().splitlines()[-1])
    for i, kwargs in enumerate(REF_CASES):
        cfg = SaveConfig(**kwargs)
        assert saved(cfg) == ref[2 * i], kwargs
        assert cfg.to_json_dict() == ref[2 * i + 1], kwargs


@pytest.mark.parametrize("kwargs", [
    {}, {"save_interval": 7}, {"save_interval": 5, "start_step": 12, "end_step": 31},
    {"save_interval": 4, "end_step": 0, "save_steps": [3, 9, 40]},
    {"save_interval": 100, "start_step": 150}, {"save_interval": 3, "save_steps": [1, 2, 50]},
])
def test_next_save_step_agrees_with_should_save_step(kwargs):
    cfg = SaveConfigMode(**kwargs)
    saved = [s for s in range(600) if cfg.should_save_step(s)]
    for step in range(560):
        expected = next((s for s in saved if s >= step), None)
        got = cfg.next_save_step(step)
        assert got == expected or (expected is None and (got is None or got >= 600)), step


def test_in_place_edits_and_unset_modes_and_schedule_generation():
    from smdebug_lite.config.save_config import schedule_generation

    cfg = SaveConfigMode(save_interval=10, save_steps=[3])
    before = schedule_generation()
    cfg.save_steps.append(7)
    assert schedule_generation() != before and cfg.should_save_step(7)
    cfg.save_steps = [1]  # a plain list assigned is watched too
    before = schedule_generation()
    cfg.save_steps += [2]
    assert schedule_generation() != before and cfg.save_steps == [1, 2]
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert json.loads(json.dumps(cfg.to_json_dict()))["save_steps"] == [1, 2]

    partial = SaveConfig(mode_save_configs={ModeKeys.TRAIN: SaveConfigMode(save_interval=3)})
    default = partial.get_save_config(ModeKeys.EVAL)
    before = schedule_generation()
    for _ in range(3):  # asked every step by a hook: the same default, no schedule change
        assert partial.get_save_config(ModeKeys.EVAL) is default
    assert schedule_generation() == before
    assert partial.get_mode_config(ModeKeys.EVAL) is None and not partial.is_complete()
