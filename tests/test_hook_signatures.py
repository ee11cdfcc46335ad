"""Every public hook's constructor, pinned: parameter names, order, kinds, defaults and
annotations, as ``inspect.signature`` reports them (what help(), IDEs and documentation tools
show), and positional and keyword calls binding to the same arguments.

Scripts written for smdebug call these constructors positionally and by keyword, so a change
here is a change of the public API, whatever the hooks share internally.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

EMPTY = inspect.Parameter.empty
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
KW = inspect.Parameter.KEYWORD_ONLY

# (name, kind, default, annotation) after `self`; EMPTY: none.
SHARED_TAIL = [
    ("export_tensorboard", POS, False, "bool"),
    ("tensorboard_dir", POS, None, "str | None"),
    ("dry_run", POS, False, "bool"),
    ("reduction_config", POS, None, "ReductionConfig | None"),
    ("save_config", POS, None, "SaveConfig | SaveConfigMode | dict | None"),
    ("include_regex", POS, None, "str | Iterable[str] | None"),
    ("include_collections", POS, None, "str | Iterable[str] | None"),
    ("save_all", POS, False, "bool"),
    ("include_workers", POS, "one", "str"),
]
# Keyword-only shared arguments, after every positional one (the XGBoost hook's own included).
SHARED_KW = [("detect_non_finite", KW, False, "bool")]
HOOK = [("out_dir", POS, EMPTY, "str"), *SHARED_TAIL, *SHARED_KW]
XGBOOST = [
    ("out_dir", POS, None, "str | None"),
    *[(n, k, d, EMPTY if n == "reduction_config" else a) for n, k, d, a in SHARED_TAIL],
    ("hyperparameters", POS, None, "Mapping[str, Any] | None"),
    ("train_data", POS, None, "Any"),
    ("validation_data", POS, None, "Any"),
    *SHARED_KW,
]
CALLBACK = [("out_dir", POS, None, "str | None"), *SHARED_TAIL, *SHARED_KW,
            ("hook", KW, None, "Any")]

PINNED = {
    ("smdebug_lite.hooks.core", "HookCore"): HOOK,
    ("smdebug_lite.pytorch", "Hook"): HOOK,
    ("smdebug_lite.tensorflow", "KerasHook"): HOOK,
    ("smdebug_lite.xgboost", "Hook"): XGBOOST,
    ("smdebug_lite.callbacks.callback_hook", "HookCallback"): CALLBACK,
    ("smdebug_lite.lightning", "DebuggerCallback"): CALLBACK,
    ("smdebug_lite.huggingface", "DebuggerCallback"): CALLBACK,
}
# What each needs installed beyond torch (imported by the package itself).
NEEDS = {"smdebug_lite.tensorflow": "tensorflow", "smdebug_lite.xgboost": "xgboost",
         "smdebug_lite.lightning": "lightning", "smdebug_lite.huggingface": "transformers"}


def _load(module: str, name: str) -> type:
    if module in NEEDS:
        pytest.importorskip(NEEDS[module])
    return getattr(importlib.import_module(module), name)


def _described(sig: inspect.Signature) -> list[tuple]:
    return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()]


@pytest.mark.parametrize(("module", "name"), list(PINNED), ids=[".".join(k) for k in PINNED])
def test_constructor_signature_is_pinned(module, name):
    cls = _load(module, name)
    expected = PINNED[(module, name)]
    init = inspect.signature(cls.__init__)
    assert _described(init) == [("self", POS, EMPTY, EMPTY), *expected]
    assert init.return_annotation == "None"
    assert _described(inspect.signature(cls)) == expected  # what help(cls) shows


def test_positional_and_keyword_calls_bind_alike(tmp_path):
    """The shared arguments in their order, positionally, are the keyword ones."""
    from smdebug_lite.pytorch import Hook

    names = [n for n, kind, *_ in HOOK if kind == POS]
    values = [str(tmp_path / "a"), False, None, True, None, {"save_interval": 3}, ["w.*"],
              ["weights"], False, "one"]
    by_position = Hook(*values)
    by_keyword = Hook(**dict(zip(names, [str(tmp_path / "b"), *values[1:]], strict=True)))
    for hook in (by_position, by_keyword):
        assert hook.dry_run is True
        assert hook.save_config.get_save_config(hook.mode).save_interval == 3
        assert "weights" in hook.include_collections and "default" in hook.include_collections
        hook.close()
    with pytest.raises(TypeError):
        Hook()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Hook(str(tmp_path / "c"), no_such_argument=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Hook(str(tmp_path / "d"), False, None, True, None, None, None, None, False, "one", 1)


def test_xgboost_extra_arguments_follow_the_shared_ones(tmp_path):
    pytest.importorskip("xgboost")
    from smdebug_lite.xgboost import Hook

    hook = Hook(str(tmp_path), False, None, True, None, None, None, None, False, "one",
                {"max_depth": 2})
    assert hook.hyperparameters == {"max_depth": 2} and hook.dry_run is True
    hook.close()
