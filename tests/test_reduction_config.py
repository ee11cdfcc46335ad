"""ReductionConfig: docs' examples, every name and variant, the JSON string form, bad input."""

from __future__ import annotations

import json

import pytest

import smdebug_lite as smd
from smdebug_lite.config.reduction_config import (
    ALLOWED_NORMS,
    ALLOWED_REDUCTIONS,
    ReductionConfig,
    parse_reductions_string,
)
from smdebug_lite.exceptions import SMDebugValueError

# The list of "reductions" strings in the hook-config docs (median variants are not supported).
DOC_REDUCTION_STRINGS = {
    "min": ("reductions", "min"),
    "max": ("reductions", "max"),
    "mean": ("reductions", "mean"),
    "std": ("reductions", "std"),
    "variance": ("reductions", "variance"),
    "sum": ("reductions", "sum"),
    "prod": ("reductions", "prod"),
    "l1": ("norms", "l1"),
    "l2": ("norms", "l2"),
    "abs_min": ("abs_reductions", "min"),
    "abs_max": ("abs_reductions", "max"),
    "abs_mean": ("abs_reductions", "mean"),
    "abs_std": ("abs_reductions", "std"),
    "abs_variance": ("abs_reductions", "variance"),
    "abs_sum": ("abs_reductions", "sum"),
    "abs_prod": ("abs_reductions", "prod"),
    "abs_l1": ("abs_norms", "l1"),
    "abs_l2": ("abs_norms", "l2"),
}


def test_allowed_names():
    assert ALLOWED_REDUCTIONS == ["min", "max", "mean", "std", "variance", "sum", "prod"]
    assert ALLOWED_NORMS == ["l1", "l2"]


def test_doc_constructor_defaults():
    rc = smd.ReductionConfig(
        reductions=None, abs_reductions=None, norms=None, abs_norms=None, save_raw_tensor=False
    )
    assert rc == ReductionConfig()
    assert rc.to_json_dict() == {"save_raw_tensor": False, "reductions": "", "save_shape": False}
    assert list(rc.to_json_dict()) == ["save_raw_tensor", "reductions", "save_shape"]
    assert rc.iter_reductions() == [] and not rc.has_reductions


def test_doc_example():
    rc = ReductionConfig(reductions=["std", "variance"], abs_reductions=["mean"], norms=["l1"])
    assert rc.iter_reductions() == [
        ("std", False),
        ("variance", False),
        ("l1", False),
        ("mean", True),
    ]
    assert rc.to_json_dict()["reductions"] == "std,variance,l1_norm,abs_mean"
    assert rc.save_raw_tensor is False


def test_string_order_matches_smdebug():
    rc = ReductionConfig(
        reductions=["mean", "max"], abs_reductions=["min"], norms=["l2"], abs_norms=["l1"]
    )
    assert rc.reductions_string() == "mean,max,l2_norm,abs_min,abs_l1_norm"
    assert rc.iter_reductions() == [
        ("mean", False),
        ("max", False),
        ("l2", False),
        ("min", True),
        ("l1", True),
    ]


@pytest.mark.parametrize("name", ALLOWED_REDUCTIONS)
def test_every_reduction_plain_and_abs(name):
    rc = ReductionConfig(reductions=[name], abs_reductions=[name])
    assert rc.reductions_string() == f"{name},abs_{name}"
    assert rc.iter_reductions() == [(name, False), (name, True)]
    assert ReductionConfig.from_dict(rc.to_json_dict()) == rc


@pytest.mark.parametrize("name", ALLOWED_NORMS)
def test_every_norm_plain_and_abs(name):
    rc = ReductionConfig(norms=[name], abs_norms=[name])
    assert rc.reductions_string() == f"{name}_norm,abs_{name}_norm"
    assert rc.iter_reductions() == [(name, False), (name, True)]
    assert ReductionConfig.from_dict(rc.to_json_dict()) == rc
    # "_norm" spelled out in the lists is accepted too
    assert ReductionConfig(norms=[f"{name}_norm"]) == ReductionConfig(norms=[name])


@pytest.mark.parametrize(("item", "target"), list(DOC_REDUCTION_STRINGS.items()))
def test_every_documented_reductions_string(item, target):
    key, name = target
    parsed = parse_reductions_string(item)
    assert parsed[key] == [name]
    assert sum(len(v) for v in parsed.values()) == 1


@pytest.mark.parametrize(
    ("item", "target"),
    [
        ("l1_norm", ("norms", "l1")),
        ("l2_norm", ("norms", "l2")),
        ("abs_l1_norm", ("abs_norms", "l1")),
        ("abs_l2_norm", ("abs_norms", "l2")),
    ],
)
def test_smdebug_norm_spellings(item, target):
    key, name = target
    assert parse_reductions_string(item)[key] == [name]


def test_full_documented_list_parses_into_one_config():
    text = ",".join(DOC_REDUCTION_STRINGS)
    rc = ReductionConfig.from_reductions_string(text, save_raw_tensor=True)
    assert rc.reductions == ALLOWED_REDUCTIONS
    assert rc.abs_reductions == ALLOWED_REDUCTIONS
    assert rc.norms == ALLOWED_NORMS and rc.abs_norms == ALLOWED_NORMS
    assert rc.save_raw_tensor is True


def test_parse_strips_spaces_and_skips_empty_items_and_duplicates():
    assert parse_reductions_string(" abs_mean , l2_norm,,mean, mean") == {
        "reductions": ["mean"],
        "abs_reductions": ["mean"],
        "norms": ["l2"],
        "abs_norms": [],
    }
    assert parse_reductions_string("") == {
        "reductions": [],
        "abs_reductions": [],
        "norms": [],
        "abs_norms": [],
    }


def test_golden_reductions_string_round_trip():
    text = "min,max,mean,std,variance,sum,prod,l1_norm,l2_norm,abs_mean,abs_l2_norm"
    d = {"save_raw_tensor": False, "reductions": text, "save_shape": False}
    rc = ReductionConfig.from_dict(d)
    assert rc.reductions == ALLOWED_REDUCTIONS
    assert rc.norms == ["l1", "l2"] and rc.abs_reductions == ["mean"] and rc.abs_norms == ["l2"]
    assert rc.to_json_dict() == d
    assert json.dumps(rc.to_json_dict()) == json.dumps(d)
    assert ReductionConfig.from_json(rc.to_json()) == rc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("1", True),
        (True, True),
        (1, True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("0", False),
        (False, False),
        (0, False),
        (None, False),
    ],
)
def test_bool_like_flags_in_dict_input(text, expected):
    rc = ReductionConfig.from_dict(
        {"reductions": "mean", "save_raw_tensor": text, "save_shape": text}
    )
    assert rc.save_raw_tensor is expected and rc.save_shape is expected
    rc = ReductionConfig.from_json(json.dumps({"save_raw_tensor": text}))
    assert rc.save_raw_tensor is expected


def test_from_dict_accepts_list_forms():
    rc = ReductionConfig.from_dict({"reductions": ["mean", "abs_l1"], "norms": ["l2"]})
    assert rc == ReductionConfig(reductions=["mean"], norms=["l2"], abs_norms=["l1"])


def test_equality_copy_repr():
    rc = ReductionConfig(reductions=["min"], norms=["l2"], save_shape=True)
    assert rc.copy() == rc and rc.copy() is not rc
    assert rc != ReductionConfig(reductions=["min"], norms=["l2"])
    assert eval(repr(rc)) == rc
    assert (rc == "x") is False


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (lambda: ReductionConfig(reductions=["median"]), ["median", "min, max, mean"]),
        (lambda: ReductionConfig(abs_reductions=["avg"]), ["abs_reductions", "avg", "prod"]),
        (lambda: ReductionConfig(norms=["l3"]), ["norms", "l3", "l1, l2"]),
        (lambda: ReductionConfig(abs_norms=["linf"]), ["abs_norms", "linf", "l1, l2"]),
        (lambda: ReductionConfig(reductions=["l1"]), ["reductions", "l1"]),
        (lambda: ReductionConfig(reductions=[3]), ["reductions", "3"]),
        (lambda: ReductionConfig(reductions=5), ["reductions", "5"]),
        (lambda: ReductionConfig(save_raw_tensor="maybe"), ["save_raw_tensor", "maybe"]),
        (lambda: ReductionConfig(save_shape=2), ["save_shape", "2"]),
        (lambda: parse_reductions_string("mean,median"), ["median", "variance", "l1_norm"]),
        (lambda: parse_reductions_string("abs_median"), ["abs_median"]),
        (lambda: parse_reductions_string("l3_norm"), ["l3_norm"]),
        (lambda: parse_reductions_string("abs_l3"), ["abs_l3"]),
        (lambda: ReductionConfig.from_dict({"reductions": "median"}), ["median"]),
        (lambda: ReductionConfig.from_dict({"reduction": "mean"}), ["reduction", "mean"]),
        (
            lambda: ReductionConfig.from_dict({"save_shape": "yes please"}),
            ["save_shape", "yes please"],
        ),
        (lambda: ReductionConfig.from_dict(["mean"]), ["reduction_config", "mean"]),
    ],
)
def test_invalid_input_names_argument_and_value(build, needles):
    with pytest.raises(SMDebugValueError) as info:
        build()
    assert isinstance(info.value, ValueError)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


# -- counts (smdebug-lite extensions) -------------------------------------------------------------


def test_counts_are_accepted_and_kept_out_of_smdebugs_string():
    rc = ReductionConfig(reductions=["mean", "num_nan", "num_inf"], abs_norms=["l2"])
    assert rc.iter_reductions() == [("mean", False), ("num_nan", False), ("num_inf", False),
                                    ("l2", True)]
    assert rc.reductions_string() == "mean,num_nan,num_inf,abs_l2_norm"
    d = rc.to_json_dict()
    assert d == {"save_raw_tensor": False, "reductions": "mean,abs_l2_norm", "save_shape": False,
                 "extension_reductions": "num_nan,num_inf"}
    assert ReductionConfig.from_dict(d) == rc
    assert ReductionConfig.from_json(rc.to_json()) == rc
    assert ReductionConfig.from_reductions_string("NUM_ZERO, max") == ReductionConfig(
        reductions=["num_zero", "max"])
    assert ReductionConfig.from_dict({"reductions": "num_nan,num_nan"}).reductions == ["num_nan"]
    # without counts, the JSON form is exactly smdebug's
    assert list(ReductionConfig(reductions=["mean"]).to_json_dict()) == [
        "save_raw_tensor", "reductions", "save_shape"]


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (lambda: ReductionConfig(abs_reductions=["num_nan"]), ["abs_reductions", "num_nan",
                                                                "no abs_ form"]),
        (lambda: parse_reductions_string("abs_num_inf"), ["abs_num_inf", "no abs_ form"]),
        (lambda: parse_reductions_string("num_nan_norm"), ["num_nan_norm", "num_zero"]),
        (lambda: ReductionConfig(norms=["num_zero"]), ["norms", "num_zero"]),
        (lambda: ReductionConfig.from_dict({"extension_reductions": "mean"}),
         ["extension_reductions", "mean", "num_nan"]),
    ],
)
def test_bad_counts_are_named(build, needles):
    with pytest.raises(SMDebugValueError) as info:
        build()
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_counts_in_debug_hook_config_json(tmp_path):
    from smdebug_lite.config.hook_json import parse_hook_config

    doc = {
        "LocalPath": str(tmp_path / "out"),
        "HookParameters": {"reductions": "num_nan,num_inf,abs_mean", "save_interval": "1"},
        "CollectionConfigurations": [
            {"CollectionName": "gradients",
             "CollectionParameters": {"reductions": "num_zero,max", "save_raw_tensor": "true"}},
        ],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(doc))
    s = parse_hook_config(path)
    assert s.reduction_config == ReductionConfig(reductions=["num_nan", "num_inf"],
                                                 abs_reductions=["mean"])
    grads = {c.name: c for c in s.collection_settings}["gradients"]
    assert grads.reduction_config == ReductionConfig(reductions=["num_zero", "max"],
                                                     save_raw_tensor=True)
    doc["HookParameters"]["reductions"] = "abs_num_nan"
    path.write_text(json.dumps(doc))
    with pytest.raises(SMDebugValueError) as info:
        parse_hook_config(path)
    assert "abs_num_nan" in str(info.value) and "num_zero" in str(info.value)
