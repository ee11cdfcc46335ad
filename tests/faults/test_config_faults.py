"""Malformed DebugHookConfig files never stop training: a hook built from the JSON (the
zero-code-change launcher, or ``get_hook(create_if_not_exists=True)``) reports one error naming
the file and the key, and real PyTorch training in a subprocess runs to the end without it.

Covered: 100,000 levels of nesting (the json module's recursion), NUL characters in paths, values
of the wrong type, an oversized file, and a file that cannot be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from smdebug_lite.config.hook_json import (
    MAX_CONFIG_BYTES,
    HookConfigError,
    parse_hook_config,
    read_local_path,
)

REPO = Path(__file__).resolve().parents[2]
DEEP = 100_000

# name -> (document text, key the error must name)
CASES: dict[str, tuple[str, str]] = {
    "deep_value": (
        '{"LocalPath": "OUT", "HookParameters": {"save_interval": '
        + "[" * DEEP + "]" * DEEP + "}}",
        "HookParameters.save_interval",
    ),
    "deep_collection": (
        '{"LocalPath": "OUT", "CollectionConfigurations": [{"CollectionName": "weights", '
        '"CollectionParameters": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}]}",
        "CollectionConfigurations",
    ),
    "nul_local_path": (json.dumps({"LocalPath": "OUT/a\0b"}), "LocalPath"),
    "nul_s3_output_path": (
        json.dumps({"LocalPath": "OUT", "S3OutputPath": "s3://bucket/a\0b"}), "S3OutputPath"),
    "nul_tensorboard_dir": (
        json.dumps({"LocalPath": "OUT", "HookParameters": {"tensorboard_dir": "tb\0"}}),
        "HookParameters.tensorboard_dir",
    ),
    "local_path_number": (json.dumps({"LocalPath": 5}), "LocalPath"),
    "include_workers_number": (
        json.dumps({"LocalPath": "OUT", "HookParameters": {"include_workers": 3}}),
        "HookParameters.include_workers",
    ),
    "save_interval_list": (
        json.dumps({"LocalPath": "OUT", "HookParameters": {"save_interval": [1]}}),
        "HookParameters.save_interval",
    ),
    "collections_string": (
        json.dumps({"LocalPath": "OUT", "CollectionConfigurations": "weights"}),
        "CollectionConfigurations",
    ),
    "hook_parameters_list": (
        json.dumps({"LocalPath": "OUT", "HookParameters": ["save_interval", "1"]}),
        "HookParameters",
    ),
}

TRAIN = textwrap.dedent("""
    import torch
    from torch import nn

    def train(steps=4):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        loss_fn = nn.MSELoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(torch.randn(8, 4)), torch.zeros(8, 2))
            loss.backward()
            opt.step()
        return steps
""")

# One process builds a hook from each file in turn, as a script that asks for the configured hook
# does, and trains whether or not it got one.
GET_HOOK = TRAIN + textwrap.dedent("""
    import os, sys
    import smdebug_lite.pytorch as smd
    from smdebug_lite.pytorch.singleton import del_hook

    for path in sys.argv[1:]:
        print("@@CONFIG " + path, flush=True)
        os.environ["SMDEBUG_CONFIG_FILE_PATH"] = path
        del_hook()
        hook = smd.get_hook(create_if_not_exists=True)
        if hook is not None:
            hook.register_module(nn.Linear(1, 1))
        print("@@TRAINED %d hook=%s" % (train(), hook is not None), flush=True)
""")

# An unmodified training script, run by the zero-code-change launcher.
PLAIN = TRAIN + 'print("@@TRAINED %d" % train(), flush=True)\n'


def _write_configs(tmp_path: Path, names: list[str]) -> list[Path]:
    paths = []
    for name in names:
        text, _ = CASES[name]
        path = tmp_path / f"{name}.json"
        path.write_text(text.replace("OUT", str(tmp_path / "out" / name)))
        paths.append(path)
    return paths


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
            "HOME": str(tmp_path), **extra}


def _errors(lines: list[str]) -> list[str]:
    return [line for line in lines if " ERROR " in line or "Traceback" in line]


def _check_error(errors: list[str], path: Path, key: str) -> None:
    assert len(errors) == 1, errors
    assert str(path) in errors[0] and key in errors[0], errors[0]
    assert "\0" not in errors[0] and len(errors[0]) < 1000, errors[0][:2000]


def test_get_hook_reports_each_bad_config_once_and_training_finishes(tmp_path):
    pytest.importorskip("torch")
    names = list(CASES)
    paths = _write_configs(tmp_path, names)
    script = tmp_path / "train.py"
    script.write_text(GET_HOOK)
    proc = subprocess.run([sys.executable, str(script), *map(str, paths)], capture_output=True,
                          text=True, timeout=300, env=_env(tmp_path), cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    sections = output.split("@@CONFIG ")[1:]
    assert len(sections) == len(names), output[-4000:]
    for name, path, section in zip(names, paths, sections, strict=True):
        assert section.startswith(str(path))
        assert "@@TRAINED 4 hook=False" in section, (name, section[-2000:])
        _check_error(_errors(section.splitlines()), path, CASES[name][1])
    assert not (tmp_path / "out").exists()  # no hook wrote anything anywhere


@pytest.mark.parametrize("name", ["deep_value", "nul_local_path", "save_interval_list"])
@pytest.mark.slow
def test_launcher_reports_a_bad_config_once_and_runs_the_script(tmp_path, name):
    pytest.importorskip("torch")
    (path,) = _write_configs(tmp_path, [name])
    script = tmp_path / "train.py"
    script.write_text(PLAIN)
    proc = subprocess.run([sys.executable, "-m", "smdebug_lite.container.train", str(script)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=_env(tmp_path, SMDEBUG_CONFIG_FILE_PATH=str(path)))
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0, "\n".join(lines[-40:])
    assert "@@TRAINED 4" in proc.stdout
    _check_error(_errors(lines), path, CASES[name][1])


# -- the parser itself (in process) ---------------------------------------------------------------


def test_deep_json_is_a_config_error_naming_the_key_not_a_recursion_error(tmp_path):
    (path,) = _write_configs(tmp_path, ["deep_value"])
    with pytest.raises(HookConfigError) as info:
        parse_hook_config(path)
    assert info.value.source == str(path) and info.value.key == "HookParameters.save_interval"
    assert "levels deep" in str(info.value)


def test_create_from_json_file_raises_config_errors_only(tmp_path):
    pytest.importorskip("torch")
    from smdebug_lite.pytorch import Hook

    for name in ("deep_collection", "nul_local_path", "nul_s3_output_path"):
        (path,) = _write_configs(tmp_path, [name])
        with pytest.raises(HookConfigError, match=CASES[name][1]):
            Hook.create_from_json_file(str(path))


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    path = tmp_path / "cfg.json"
    name = "[" * 100 + '"{\\'
    path.write_text(json.dumps({
        "LocalPath": str(tmp_path / "out" / ("[{" * 100)),
        "HookParameters": {"include_regex": "x" + "\\[" * 200},
        "CollectionConfigurations": [{"CollectionName": name}],
    }))
    settings = parse_hook_config(path)
    assert settings.out_dir.endswith("[{" * 100)
    assert settings.include_regex == ["x" + "\\[" * 200]
    assert settings.include_collections == [name]


def test_oversized_and_unreadable_files_are_config_errors(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"LocalPath": "' + "a" * (MAX_CONFIG_BYTES + 10) + '"}')
    with pytest.raises(HookConfigError, match="at most"):
        parse_hook_config(big)
    with pytest.raises(HookConfigError, match="IsADirectoryError"):
        parse_hook_config(tmp_path)
    with pytest.raises(FileNotFoundError):  # still means "no debugging configured"
        parse_hook_config(tmp_path / "missing.json")


def test_output_config_files_are_bounded_and_checked(tmp_path):
    """TensorBoard and checkpoint configs (LocalPath read by `read_local_path`)."""
    deep = tmp_path / "tb.json"
    deep.write_text('{"LocalPath": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(HookConfigError, match="levels deep"):
        read_local_path(str(deep))
    nul = tmp_path / "ckpt.json"
    nul.write_text(json.dumps({"LocalPath": "/opt/ml/checkpoints\0"}))
    with pytest.raises(HookConfigError, match="LocalPath"):
        read_local_path(str(nul))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    assert read_local_path(str(empty)) is None
