"""In-process tests of the rule runner's parts: configuration, source loading, binding, status."""

from __future__ import annotations

import io
import json
import signal
import tarfile
from pathlib import Path

import pytest

from smdebug_lite.rule_runner import EXIT_ERROR, EXIT_ISSUES_FOUND, EXIT_NO_ISSUES
from smdebug_lite.rule_runner.params import ConfigError, build_config, parse_step, rebase
from smdebug_lite.rule_runner.runner import bind_arguments
from smdebug_lite.rule_runner.source import SourceError, load_user_rule, safe_extract
from smdebug_lite.rule_runner.status import MAX_MESSAGE_BYTES, Outcome, StatusReport, truncate_utf8

# --- configuration -------------------------------------------------------------------------


def _cfg(tmp_path: Path, env: dict[str, str] | None = None, cli: dict[str, str] | None = None,
         **kw):
    return build_config(environ=env or {}, cli_params=cli, opt_ml=str(tmp_path / "opt_ml"), **kw)


def test_env_reserved_names_and_defaults(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, {
        "rule_to_invoke": "MyRule", "source_s3_uri": "s3://b/k/r.py", "start_step": "3",
        "end_step": "10", "other_trial_1": "s3://b/t1", "other_trial_0": "s3://b/t0",
        "other_trials": "s3://b/t2, s3://b/t0", "PATH": "/usr/bin", "threshold": "0.5",
    })
    assert cfg.rule_to_invoke == "MyRule"
    assert cfg.source == "s3://b/k/r.py"
    assert (cfg.start_step, cfg.end_step) == (3, 10)
    assert cfg.other_trials == ["s3://b/t0", "s3://b/t1", "s3://b/t2"]
    assert cfg.output_dir == tmp_path / "opt_ml" / "processing" / "output" / "rule"
    assert cfg.message_file == tmp_path / "opt_ml" / "output" / "message"
    # unrelated environment variables are never explicit parameters
    assert cfg.explicit == {}
    assert cfg.rule_parameters({"threshold"}, takes_var_kwargs=True) == {"threshold": "0.5"}


def test_cli_overrides_env_and_config_file(tmp_path: Path) -> None:
    root = tmp_path / "opt_ml"
    (root / "config").mkdir(parents=True)
    (root / "config" / "processingjobconfig.json").write_text(json.dumps({
        "Environment": {"rule_to_invoke": "FromFile", "threshold": "1", "extra": "x"},
        "ProcessingInputs": [
            {"InputName": "tensors", "S3Input": {"S3Uri": "s3://bkt/job/debug-output",
                                                 "LocalPath": "/opt/ml/processing/input/tensors"}},
            {"InputName": "other_trial_0", "S3Input": {"S3Uri": "file:///x",
                                                       "LocalPath": "/opt/ml/processing/input/o"}},
        ],
        "ProcessingOutputConfig": {"Outputs": [
            {"OutputName": "rule", "S3Output": {"LocalPath": "/opt/ml/processing/output/custom"}}]},
    }))
    cfg = _cfg(tmp_path, {"rule_to_invoke": "FromEnv", "threshold": "2"},
               {"threshold": "3", "rule_to_invoke": None})
    assert cfg.rule_to_invoke == "FromEnv"
    assert cfg.base_trial == "s3://bkt/job/debug-output"  # live S3 beats the mounted snapshot
    assert cfg.other_trials == [str(root / "processing/input/o")]  # rebased onto the root
    assert cfg.output_dir == root / "processing/output/custom"
    assert cfg.rule_parameters({"threshold"}, False) == {"threshold": "3"}
    assert cfg.rule_parameters(set(), True) == {"threshold": "3", "extra": "x"}
    cfg2 = _cfg(tmp_path, {"rule_to_invoke": "FromEnv"}, {"rule_to_invoke": "FromCli"})
    assert cfg2.rule_to_invoke == "FromCli"


def test_steps_and_paths(tmp_path: Path) -> None:
    assert parse_step("start_step", "") is None
    assert parse_step("start_step", " 7 ") == 7
    for bad in ("-1", "abc", "1.5"):
        with pytest.raises(ConfigError, match="start_step"):
            parse_step("start_step", bad)
    with pytest.raises(ConfigError, match="greater than"):
        _cfg(tmp_path, {"start_step": "5", "end_step": "5"})
    assert rebase("/opt/ml/x/y", Path("/r")) == "/r/x/y"
    assert rebase("/opt/mlx", Path("/r")) == "/opt/mlx"
    assert rebase("/opt/ml/x", Path("/opt/ml")) == "/opt/ml/x"
    assert _cfg(tmp_path, {"SM_OPT_ML": "/ignored"}).opt_ml == tmp_path / "opt_ml"
    assert build_config(environ={"SM_OPT_ML": str(tmp_path)}).opt_ml == tmp_path


# --- source loading ------------------------------------------------------------------------

RULE_SRC = """
from smdebug.rules import Rule

class {name}(Rule):
    def __init__(self, base_trial, threshold="1.0"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        return False
"""


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return path


def _file(name: str, text: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), text.encode()


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def test_load_py_file(tmp_path: Path) -> None:
    src = tmp_path / "my_rule.py"
    src.write_text(RULE_SRC.format(name="PyRule"))
    cls = load_user_rule(str(src), "PyRule", tmp_path / "work")
    assert cls.__name__ == "PyRule"
    with pytest.raises(SourceError, match="class Missing not found.*PyRule"):
        load_user_rule(str(src), "Missing", tmp_path / "work")


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        load_user_rule(str(tmp_path / "nope.py"), "X", tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_text("class X(:\n")
    with pytest.raises(SourceError, match="SyntaxError"):
        load_user_rule(str(bad), "X", tmp_path)
    other = tmp_path / "rule.txt"
    other.write_text("x")
    with pytest.raises(SourceError, match=r"\.py file or a \.tar\.gz"):
        load_user_rule(str(other), "X", tmp_path)
    notrule = tmp_path / "notrule.py"
    notrule.write_text("class X:\n    pass\n")
    with pytest.raises(SourceError, match="invoke_at_step"):
        load_user_rule(str(notrule), "X", tmp_path)


def test_load_package_archive(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "rules.tar.gz", [
        _file("pkg/__init__.py", ""),
        _file("pkg/helpers.py", "FACTOR = 2\n"),
        _file("pkg/rules.py", "from .helpers import FACTOR\n" + RULE_SRC.format(name="PkgRule")),
        _link("pkg/alias.py", "helpers.py"),  # a link inside the archive is fine
    ])
    cls = load_user_rule(str(archive), "PkgRule", tmp_path / "work")
    assert cls.__module__ == "pkg.rules"
    assert (tmp_path / "work" / "source" / "pkg" / "alias.py").read_text() == "FACTOR = 2\n"


@pytest.mark.parametrize("members,match", [
    ([_file("/etc/evil.py", "x")], "absolute path"),
    ([_file("a/../../evil.py", "x")], r"'\.\.'"),
    ([_link("esc", "../../outside")], "outside the archive"),
    ([_link("abs", "/etc/passwd")], "outside the archive"),
    ([_link("hard", "../x", tarfile.LNKTYPE)], "outside the archive"),
    ([_link("fifo", "", tarfile.FIFOTYPE)], "not a regular file"),
])
def test_unsafe_archives_are_refused(tmp_path: Path, members, match) -> None:
    archive = _tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(SourceError, match=match):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "evil.py").exists()


# --- constructor binding -------------------------------------------------------------------


class _Base:
    def invoke_at_step(self, step):
        return False


class Plain(_Base):
    def __init__(self, base_trial, threshold, mode="x"):
        self.args = (base_trial, threshold, mode)


class WithOthers(_Base):
    def __init__(self, base_trial, other_trials, action_str=None):
        self.args = (base_trial, other_trials, action_str)


class RequiredActions(_Base):  # smdebug >= 1.0.9 signature
    def __init__(self, base_trial, action_str, other_trials=None):
        self.args = (base_trial, action_str, other_trials)


class KwArgs(_Base):
    def __init__(self, base_trial, **kwargs):
        self.kwargs = kwargs


def test_bind_only_declared_parameters(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, {"threshold": "0.1", "HOME": "/root", "mode": "y", "unused": "z"})
    bound = bind_arguments(Plain, "BASE", [], cfg)
    assert bound.args == ["BASE"]
    assert bound.kwargs == {"threshold": "0.1", "mode": "y"}
    Plain(*bound.args, **bound.kwargs)


def test_bind_missing_required_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="requires parameter 'threshold'"):
        bind_arguments(Plain, "BASE", [], _cfg(tmp_path))
    with pytest.raises(ConfigError, match="other_trial_0"):
        bind_arguments(WithOthers, "BASE", [], _cfg(tmp_path))


def test_bind_other_trials_actions_and_kwargs(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, {"action_json": '[{"name": "stoptraining"}]', "threshold": "1"},
               {"extra": "e"})
    bound = bind_arguments(WithOthers, "BASE", ["O1"], cfg)
    assert bound.kwargs == {"other_trials": ["O1"], "action_str": '[{"name": "stoptraining"}]'}
    assert bind_arguments(RequiredActions, "B", [], _cfg(tmp_path)).kwargs == {"action_str": ""}
    bound = bind_arguments(KwArgs, "BASE", [], cfg)
    # **kwargs gets explicit keys (CLI/config file), not arbitrary environment variables
    assert bound.kwargs == {"extra": "e", "action_str": '[{"name": "stoptraining"}]'}


# --- status --------------------------------------------------------------------------------


def test_truncate_utf8_on_char_boundary() -> None:
    text = "ClientError: " + "é" * 2000
    out = truncate_utf8(text)
    assert len(out.encode()) <= MAX_MESSAGE_BYTES
    assert len(out.encode()) >= MAX_MESSAGE_BYTES - 1
    assert text.startswith(out)


def test_outcomes_and_files(tmp_path: Path) -> None:
    issues = Outcome.issues("VanishingGradient", 500)
    assert issues.exit_code == EXIT_ISSUES_FOUND
    assert issues.message == ("RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient "
                              "at step 500 resulted in the condition being met\n")
    try:
        raise ValueError("x" * 3000)
    except ValueError as e:
        err = Outcome.error("bad things", e)
    assert err.exit_code == EXIT_ERROR
    assert err.message.startswith("ClientError: bad things\nTraceback (most recent call last):")
    assert len(err.message.encode()) <= MAX_MESSAGE_BYTES
    assert Outcome.no_issues().exit_code == EXIT_NO_ISSUES
    assert Outcome.stopped(signal.SIGTERM, 4).exit_code == 143

    report = StatusReport("cfg-name", "R", tmp_path / "rule" / "cfg-name.json",
                          tmp_path / "output" / "message", tmp_path / "output" / "failure")
    report.write_progress()
    assert json.loads(report.json_path.read_text())["status"] == "InProgress"
    doc = report.write_final(issues)
    assert doc["status"] == "IssuesFound" and doc["step"] == 500
    assert report.message_file.read_text() == issues.message
    assert report.failure_file.read_text() == issues.message
    report.clear_previous()
    report.write_final(Outcome.no_issues())
    assert not report.message_file.exists() and not report.failure_file.exists()
    assert json.loads(report.json_path.read_text())["status"] == "NoIssuesFound"
    assert [p.name for p in report.json_path.parent.iterdir()] == ["cfg-name.json"]
