"""Replays the queries of `tests/data/golden/expected/*.json` against a Trial.

Each query becomes an answer in the same JSON shape the golden files use (errors as
{"__exception__": <class name>}), so golden tests and S3-vs-local comparisons share one runner.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from smdebug_lite.modes import ModeKeys

REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2")


def mode_of(q: dict) -> ModeKeys:
    return ModeKeys[q.get("mode", "GLOBAL")]


def digest(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def scalar_answer(v: Any) -> dict:
    a = np.asarray(v)
    return {"value": float(a), "dtype": a.dtype.str, "shape": list(a.shape)}


def guarded(fn) -> Any:
    try:
        return fn()
    except Exception as e:  # every error becomes its class name, as in the golden files
        return {"__exception__": type(e).__name__}


def collection_answer(c) -> dict:
    rc = c.reduction_config
    sc = c.save_config
    return {
        "name": c.name,
        "tensor_names": sorted(c.tensor_names),
        "include_regex": list(c.include_regex),
        "save_histogram": c.save_histogram,
        "reduction_config": None if rc is None else {
            "reductions": list(rc.reductions), "abs_reductions": list(rc.abs_reductions),
            "norms": list(rc.norms), "abs_norms": list(rc.abs_norms),
            "save_raw_tensor": rc.save_raw_tensor, "save_shape": rc.save_shape,
        },
        "save_config": None if sc is None else {
            m.name: sc.get_save_config(m).to_json_dict()
            for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL)
        },
    }


def answer(trial, q: dict) -> Any:  # noqa: C901 - one branch per op, kept flat on purpose
    op = q["op"]
    mode = mode_of(q)
    if op == "tensor_names":
        kw = {k: q[k] for k in ("step", "regex", "collection") if k in q}
        if "mode" in q:
            kw["mode"] = mode
        return guarded(lambda: trial.tensor_names(**kw))
    if op == "tensor_names_regex_and_collection":
        return guarded(lambda: trial.tensor_names(regex=".*", collection=q["collection"]))
    if op == "modes":
        return sorted(m.name for m in trial.modes())
    if op == "workers":
        return trial.workers()
    if op == "collections":
        return sorted(trial.collections())
    if op == "collection":
        return collection_answer(trial.collection(q["name"]))
    if op == "steps":
        return trial.steps(mode=mode)
    if op == "mode_modestep":
        m, s = trial.mode_modestep(q["step"])
        return [m.name if m is not None else None, s]
    if op == "mode_of":
        m = trial.mode(q["step"])
        return m.name if m is not None else None
    if op == "mode_step_of":
        return trial.mode_step(q["step"])
    if op == "global_step":
        return trial.global_step(mode, q["mode_step"])
    if op == "has_passed_step":
        return trial.has_passed_step(q["step"], mode).name
    if op == "has_tensor":
        return trial.has_tensor(q["name"])
    if op == "trial_tensor_unknown":
        return guarded(lambda: trial.tensor(q["name"]) and None)
    t = trial.tensor(q["name"])
    if op == "t_steps":
        return t.steps(mode=mode)
    if op == "t_values":
        return guarded(lambda: {str(s): digest(v) for s, v in t.values(mode=mode).items()})
    if op == "t_prev_steps":
        return t.prev_steps(q["step"], q.get("n"), mode=mode)
    if op == "t_value":
        def value():
            v = t.value(q["step"], mode=mode)
            return {"dtype": v.dtype.str, "shape": list(v.shape), "sha256": digest(v)}
        return guarded(value)
    if op == "t_shape":
        return guarded(lambda: list(t.shape(q["step"], mode=mode)))
    if op == "t_workers":
        return guarded(lambda: t.workers(q["step"], mode=mode))
    if op == "t_reductions":
        out = {}
        for red in REDUCTIONS:
            for kind in ("raw", "abs"):
                out[f"{red}:{kind}"] = guarded(lambda red=red, kind=kind: scalar_answer(
                    t.reduction_value(q["step"], red, mode=mode, abs=kind == "abs")))
        return out
    if op == "t_reduction_values":
        def reductions():
            rv = t.reduction_values(q["step"], mode=mode)
            return {f"{n}:{'abs' if a else 'raw'}": scalar_answer(v) for (n, a), v in rv.items()}
        return guarded(reductions)
    if op == "t_reduction_bad_name":
        return guarded(lambda: t.reduction_value(q["step"], "median", mode=mode))
    if op == "t_value_bad_worker":
        return guarded(lambda: t.value(q["step"], mode=mode, worker="worker_999"))
    if op == "t_step_removed_api":
        return guarded(lambda: t.step(q["step"]))
    raise AssertionError(f"unknown golden op {op!r}")


def canonical(x: Any) -> Any:
    """The answer with NaN floats replaced by 'nan', so equal answers compare equal."""
    if isinstance(x, float) and x != x:
        return "nan"
    if isinstance(x, dict):
        return {k: canonical(v) for k, v in x.items()}
    if isinstance(x, list):
        return [canonical(v) for v in x]
    return x
