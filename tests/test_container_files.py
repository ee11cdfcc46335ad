"""Static checks of the Dockerfile, the lock files and buildspec.yml (no Docker engine needed)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

pytestmark = pytest.mark.container

yaml = pytest.importorskip("yaml")
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_LOCK = "rule_runner/requirements.lock"  # the runtime both images share
TRAINING_LOCK = "container/requirements-training.lock"
BUILD_LOCK = "requirements-build.lock"
LOCKS = (RUNTIME_LOCK, TRAINING_LOCK, BUILD_LOCK)
RAW_IP_URL = re.compile(r"\w+://\d{1,3}(\.\d{1,3}){3}")
PIPE_TO_SHELL = re.compile(r"(curl|wget)\b[^|\n]*\|\s*(ba|z)?sh\b")


@dataclass
class Instruction:
    name: str
    args: str
    stage: str | None


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction]


def parse_dockerfile(text: str) -> tuple[list[Stage], dict[str, str]]:
    """Instructions per stage (continuations joined, comments dropped) and global ARG defaults."""
    logical: list[str] = []
    buf = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        logical.append(buf + stripped)
        buf = ""
    stages: list[Stage] = []
    global_args: dict[str, str] = {}
    for line in logical:
        name, _, args = line.partition(" ")
        name = name.upper()
        args = args.strip()
        if name == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", args, re.IGNORECASE)
            assert m, f"bad FROM line: {line}"
            stages.append(Stage((m.group(2) or str(len(stages))).lower(), m.group(1), []))
        elif not stages:
            assert name == "ARG", f"only ARG may precede the first FROM, got {line}"
            key, _, default = args.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append(Instruction(name, args, stages[-1].name))
    return stages, global_args


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, Stage], dict[str, str]]:
    stages, args = parse_dockerfile((ROOT / "Dockerfile").read_text())
    by_name = {s.name: s for s in stages}
    assert len(by_name) == len(stages), "stage names must be unique"
    return by_name, args


def _chain(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and its ancestors, nearest first."""
    out = [stages[name]]
    while out[-1].base.lower() in stages:
        out.append(stages[out[-1].base.lower()])
    return out


def _last(stages: dict[str, Stage], target: str, instr: str) -> Instruction | None:
    for stage in _chain(stages, target):
        found = [i for i in stage.instructions if i.name == instr]
        if found:
            return found[-1]
    return None


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("target,script", [("rule-evaluator", "smdebug-rule-runner"),
                                           ("training", "smdebug-train")])
def test_targets_have_exec_form_entrypoint_and_non_root_user(dockerfile, target, script) -> None:
    stages, _ = dockerfile
    assert target in stages, f"Dockerfile has no stage named {target}"
    entry = _last(stages, target, "ENTRYPOINT")
    assert entry is not None, f"{target} has no ENTRYPOINT"
    argv = json.loads(entry.args)  # exec form is a JSON array; shell form fails here
    assert isinstance(argv, list) and argv[0] == script
    assert _pyproject()["project"]["scripts"][script]  # the console script exists
    user = _last(stages, target, "USER")
    assert user is not None, f"{target} runs as root (no USER)"
    assert user.args.split(":")[0] not in {"root", "0"}


def test_base_image_is_slim_python(dockerfile) -> None:
    stages, args = dockerfile
    for stage in stages.values():
        base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), stage.base)
        if base.lower() in stages:
            continue
        assert re.match(r"python:3\.\d+(\.\d+)?-slim", base), f"{stage.name}: base {base}"


def test_locks_are_installed_and_checked(dockerfile) -> None:
    stages, _ = dockerfile
    runs = {t: " ".join(i.args for s in _chain(stages, t) for i in s.instructions
                        if i.name == "RUN") for t in ("rule-evaluator", "training")}
    copies = " ".join(i.args for s in stages.values() for i in s.instructions if i.name == "COPY")
    for target, text in runs.items():
        assert re.search(r"pip install --no-deps -r \S*requirements\.lock", text), target
        assert "pip check" in text, target
    assert re.search(r"pip install --no-deps -r \S*requirements-training\.lock", runs["training"])
    assert "requirements-training.lock" not in runs["rule-evaluator"]
    for lock in LOCKS:
        assert lock in copies, f"{lock} is never copied into the image"


def _pins(lock: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / lock).read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line)
        assert m, f"{lock}: {line!r} is not an exact pin"
        pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def test_lock_files_pin_exact_versions_that_satisfy_pyproject() -> None:
    runtime = _pins(RUNTIME_LOCK)
    for name in ("numpy", "protobuf", "boto3", "crc32c", "ml-dtypes"):
        assert name in runtime, f"{RUNTIME_LOCK} lacks {name}"
    for dep in _pyproject()["project"]["dependencies"]:
        req = Requirement(dep)
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert Version(runtime[key]) in req.specifier, f"{key}=={runtime[key]} vs {dep}"
    training = _pins(TRAINING_LOCK)
    assert "torch" in training
    torch_req = Requirement(next(d for d in _pyproject()["project"]["optional-dependencies"]
                                 ["torch"] if d.startswith("torch")))
    assert Version(training["torch"]) in torch_req.specifier
    assert not set(runtime) & set(training), "the training lock repeats runtime pins"
    assert "hatchling" in _pins(BUILD_LOCK)


def test_copied_paths_exist_and_are_not_dockerignored(dockerfile) -> None:
    stages, _ = dockerfile
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    for stage in stages.values():
        for instr in stage.instructions:
            if instr.name != "COPY" or "--from=" in instr.args:
                continue
            sources = shlex.split(instr.args)[:-1]
            for src in sources:
                if src == "README.md" and not (ROOT / src).exists():
                    continue  # written by the lead; the image build needs it (pyproject readme)
                assert (ROOT / src).exists(), f"COPY {src}: no such file"
                assert src not in ignored, f"COPY {src} is excluded by .dockerignore"


def test_no_raw_ip_urls_or_pipe_to_shell() -> None:
    for name in ("Dockerfile", "buildspec.yml", *LOCKS):
        text = (ROOT / name).read_text()
        assert not RAW_IP_URL.search(text), name
        assert not PIPE_TO_SHELL.search(text), name


@pytest.fixture(scope="module")
def buildspec() -> dict:
    doc = yaml.safe_load((ROOT / "buildspec.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def _commands(spec: dict, phase: str) -> list[str]:
    cmds = spec["phases"][phase]["commands"]
    assert isinstance(cmds, list) and all(isinstance(c, str) for c in cmds)
    return cmds


def test_buildspec_structure(buildspec) -> None:
    assert str(buildspec["version"]) == "0.2"
    assert list(buildspec["phases"]) == ["install", "pre_build", "build", "post_build"]
    assert "python" in buildspec["phases"]["install"]["runtime-versions"]
    assert buildspec["artifacts"]["files"] == ["imagedefinitions.json"]


def test_buildspec_tests_logs_in_builds_tags_and_pushes(buildspec) -> None:
    pre = "\n".join(_commands(buildspec, "pre_build"))
    build = _commands(buildspec, "build")
    post = "\n".join(_commands(buildspec, "post_build"))
    assert "pytest" in pre
    assert re.search(r"aws ecr get-login-password --region \$AWS_DEFAULT_REGION \| docker login "
                     r"--username AWS --password-stdin \$ACCOUNT\.dkr\.ecr\.", pre)
    # the tag is the short commit SHA CodeBuild resolved
    tag = re.search(r"IMAGE_TAG=(.*)", pre)
    assert tag and "CODEBUILD_RESOLVED_SOURCE_VERSION" in tag.group(1)
    images = {}
    for target in ("rule-evaluator", "training"):
        line = next((c for c in build if f"--target {target}" in c), None)
        assert line and line.startswith("docker build"), f"no docker build for {target}"
        var = re.search(r'-t "?\$(\w+)"?', line).group(1)
        assert re.search(rf"{var}=.*\$IMAGE_TAG", pre), f"{target} image is not tagged with the commit"
        assert f'docker push "${var}"' in post, f"{target} image is not pushed"
        images[target] = var
    assert "imagedefinitions.json" in post
    assert all(f"${v}" in post.split("imagedefinitions")[0].split("printf")[-1] for v in images.values())


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not available")
def test_buildspec_commands_are_valid_bash(buildspec) -> None:
    script = "\n".join(c for phase in buildspec["phases"].values() for c in phase.get("commands", []))
    proc = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr


# The images' programs: a top-level directory each, installed as smdebug_lite.<name>.
PROGRAMS = {"container": TRAINING_LOCK, "rule_runner": RUNTIME_LOCK}


def test_top_level_holds_the_images_programs() -> None:
    for name, lock in PROGRAMS.items():
        top = ROOT / name
        assert (top / "__init__.py").is_file() and (top / "README.md").is_file(), name
        assert Path(lock).parent.name == name and (ROOT / lock).is_file(), lock
    for old in ("launcher", "container", "rule_runner"):
        assert not (ROOT / "smdebug_lite" / old).exists(), f"smdebug_lite/{old} is back"


def test_wheel_installs_no_generic_top_level_package() -> None:
    """The programs install under smdebug_lite; a top-level `container` or `rule_runner` would
    collide with other distributions. From a checkout the same names import (the package maps
    them), so the console scripts resolve."""
    import importlib

    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert sorted(wheel["only-include"]) == ["container", "rule_runner", "smdebug_lite"]
    assert wheel["sources"] == {name: f"smdebug_lite/{name}" for name in PROGRAMS}
    scripts = _pyproject()["project"]["scripts"]
    for name in ("smdebug-rule-runner", "smdebug-train"):
        module, _, attr = scripts[name].partition(":")
        assert module.startswith("smdebug_lite."), scripts[name]
        assert callable(getattr(importlib.import_module(module), attr)), scripts[name]
    for name in PROGRAMS:
        package = importlib.import_module(f"smdebug_lite.{name}")
        assert Path(package.__file__).resolve() == ROOT / name / "__init__.py"


@pytest.mark.timeout(300)
def test_built_wheel_holds_the_programs_inside_the_package(tmp_path) -> None:
    import importlib.util
    import sys
    import zipfile

    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (the build backend) is not installed")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = tmp_path.glob("smdebug_lite-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"smdebug_lite", "_smdebug_lite_alias.py", "smdebug_lite-alias.pth"}, tops
    for name in PROGRAMS:
        sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / name).glob("*.py")}
        packaged = {n.removeprefix("smdebug_lite/") for n in names
                    if n.startswith(f"smdebug_lite/{name}/")}
        assert packaged == sources, (name, sorted(packaged ^ sources))
    assert "smdebug_lite/rules/__init__.py" in names
    assert not [n for n in names if n.endswith((".md", ".lock", ".pyc"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "smdebug-train = smdebug_lite.container.train:main" in text
    assert "smdebug-rule-runner = smdebug_lite.rule_runner.__main__:main" in text


def test_wheel_stage_copies_every_file_the_wheel_build_reads(dockerfile) -> None:
    """The image builds its wheel from COPYed files only: one left out (the README pyproject
    names, LICENSE, the alias) fails the build or silently leaves it out of the wheel."""
    stages, _ = dockerfile
    copied = {src.rstrip("/") for instr in stages["wheel"].instructions
              if instr.name == "COPY" and "--from=" not in instr.args
              for src in shlex.split(instr.args)[:-1]}
    project = _pyproject()["project"]
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    readme = project["readme"] if isinstance(project["readme"], str) else project["readme"]["file"]
    needed = {"pyproject.toml", readme, *project.get("license-files", []),
              *wheel["only-include"], *wheel.get("force-include", {})}
    assert needed <= copied, f"the wheel stage does not COPY {sorted(needed - copied)}"
    runtime = " ".join(i.args for i in stages["runtime"].instructions)
    assert "--from=wheel" in runtime and re.search(r"pip install --no-deps \S*/\*\.whl", runtime)
