"""The release: the workflow a pushed tag runs, the changelog, and the version a build and a
checkout report (no network; the wheel builds run without build isolation)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

yaml = pytest.importorskip("yaml")
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
CHANGELOG = ROOT / "CHANGELOG.md"
BUILD_LOCK = ROOT / "requirements-build.lock"
PUBLISH_ACTION = "pypa/gh-action-pypi-publish"
VERSION_HEADING = re.compile(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})")
KEEP_A_CHANGELOG_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _fallback_version() -> str:
    return _pyproject()["tool"]["hatch"]["version"]["fallback-version"]


# -- the workflow ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def _steps(job: dict) -> list[dict]:
    steps = job["steps"]
    assert isinstance(steps, list) and all(isinstance(s, dict) for s in steps)
    return steps


def _index(steps: list[dict], pred, what: str) -> int:
    found = [i for i, s in enumerate(steps) if pred(s)]
    assert found, f"no step {what}"
    return found[0]


def _runs(text: str):
    return lambda step: text in str(step.get("run", ""))


def _uses(action: str):
    return lambda step: str(step.get("uses", "")).startswith(action)


def _needs(jobs: dict, name: str) -> set[str]:
    """Every job `name` waits for, directly or through others."""
    needs = jobs[name].get("needs", [])
    direct = {needs} if isinstance(needs, str) else set(needs)
    return direct.union(*(_needs(jobs, n) for n in direct)) if direct else set()


def test_workflow_runs_on_pushed_version_tags_only(workflow) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"push"}, triggers
    assert triggers["push"]["tags"] == ["v*"]
    assert "branches" not in triggers["push"]


def test_workflow_builds_and_checks_both_artifacts_before_publishing(workflow) -> None:
    jobs = workflow["jobs"]
    publishers = [name for name, job in jobs.items()
                  if any(_uses(PUBLISH_ACTION)(s) for s in _steps(job))]
    assert len(publishers) == 1, publishers
    publish = publishers[0]
    builders = [name for name, job in jobs.items()
                if any(_runs("python -m build")(s) for s in _steps(job))]
    assert len(builders) == 1, builders
    build = builders[0]
    assert build in _needs(jobs, publish), "publishing does not wait for the build and its checks"

    steps = _steps(jobs[build])
    checkout = _index(steps, _uses("actions/checkout"), "checking out the tag")
    assert steps[checkout].get("with", {}).get("fetch-depth") == 0, \
        "hatch-vcs needs the tags: fetch-depth 0"
    built = _index(steps, _runs("python -m build"), "building")
    run = str(steps[built]["run"])
    assert "--sdist" not in run and "--wheel" not in run, "python -m build alone makes both"
    wheel_check = _index(steps, _runs("bash scripts/check_wheel.sh"), "checking the wheel")
    assert "--dist dist" in str(steps[wheel_check]["run"]), "check the artifacts to publish"
    twine = _index(steps, _runs("twine check"), "running twine check")
    assert checkout < built < wheel_check and built < twine
    assert "dist/*" in str(steps[twine]["run"])


def test_workflow_publishes_through_trusted_publishing(workflow) -> None:
    jobs = workflow["jobs"]
    name, job = next((n, j) for n, j in jobs.items()
                     if any(_uses(PUBLISH_ACTION)(s) for s in _steps(j)))
    assert job.get("permissions", {}).get("id-token") == "write"
    environment = job.get("environment")
    assert (environment.get("name") if isinstance(environment, dict) else environment) == "pypi"
    step = next(s for s in _steps(job) if _uses(PUBLISH_ACTION)(s))
    assert not {"password", "user", "username"} & set(step.get("with") or {})
    assert "secrets." not in WORKFLOW.read_text(), "trusted publishing needs no stored token"
    # only the publishing job may mint an OIDC token
    top = workflow.get("permissions", {})
    assert top.get("id-token") in (None, "none"), top
    for other, other_job in jobs.items():
        if other != name:
            assert other_job.get("permissions", {}).get("id-token") in (None, "none"), other


# -- the changelog -----------------------------------------------------------------------------


def test_changelog_follows_keep_a_changelog() -> None:
    lines = CHANGELOG.read_text().splitlines()
    assert lines[0] == "# Changelog"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## [Unreleased]", "the first section collects unreleased changes"
    releases = headings[1:]
    assert releases, "no released version"
    versions = []
    for heading in releases:
        m = VERSION_HEADING.fullmatch(heading)
        assert m, f"{heading!r} is not '## [x.y.z] - YYYY-MM-DD'"
        versions.append(Version(m.group(1)))
    assert versions == sorted(versions, reverse=True), "versions are not newest first"
    assert len(set(versions)) == len(versions)
    for line in lines:
        if line.startswith("### "):
            assert line[4:] in KEEP_A_CHANGELOG_KINDS, f"{line!r}: not a Keep a Changelog kind"


def test_changelog_has_the_fallback_version() -> None:
    fallback = _fallback_version()
    text = CHANGELOG.read_text()
    assert re.search(rf"^## \[{re.escape(fallback)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M), \
        f"CHANGELOG.md has no entry for {fallback}, pyproject's fallback-version"


# -- the version -------------------------------------------------------------------------------


def test_version_is_a_pep440_version() -> None:
    import smdebug_lite

    Version(smdebug_lite.__version__)  # raises InvalidVersion


def test_cli_prints_the_version() -> None:
    pytest.importorskip("typer")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    # Both read now: a wheel built from the checkout by another test rewrites the build's
    # version file, so this process's import may hold an older one.
    version = run("-c", "import smdebug_lite; print(smdebug_lite.__version__)").strip()
    assert run("-m", "smdebug_lite.cli", "--version") == f"smdebug-lite {version}\n"


def test_version_comes_from_the_build_then_the_distribution(monkeypatch) -> None:
    """A checkout never built (no _build_version) falls back to the installed distribution,
    then to a placeholder that still parses as a version."""
    import importlib.metadata

    from smdebug_lite import _version

    monkeypatch.setitem(sys.modules, "smdebug_lite._build_version", None)  # import fails
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.8.7")
    assert _version._resolve() == "9.8.7"

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _version._resolve() == _version.UNKNOWN_VERSION
    Version(_version.UNKNOWN_VERSION)


def test_version_comes_from_vcs_with_a_fallback() -> None:
    hatch = _pyproject()["tool"]["hatch"]
    assert hatch["version"]["source"] == "vcs"
    Version(hatch["version"]["fallback-version"])
    assert hatch["build"]["hooks"]["vcs"]["version-file"] == "smdebug_lite/_build_version.py"
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/smdebug_lite/_build_version.py" in ignored


def test_build_lock_pins_every_build_requirement() -> None:
    """The image builds the wheel without isolation from requirements-build.lock alone."""
    pins = {}
    for line in BUILD_LOCK.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    for requirement in _pyproject()["build-system"]["requires"]:
        req = Requirement(requirement)
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert key in pins, f"{BUILD_LOCK.name} lacks {key}"
        assert Version(pins[key]) in req.specifier, f"{key}=={pins[key]} vs {requirement}"
    assert {"setuptools-scm", "vcs-versioning", "setuptools"} <= set(pins)  # hatch-vcs's own


def _source_tree_without_git(dest: Path) -> Path:
    """What the image's wheel stage copies (no .git: the build context leaves it out)."""
    for name in ("pyproject.toml", "README.md", "LICENSE", "_smdebug_lite_alias.py",
                 "smdebug_lite-alias.pth"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("smdebug_lite", "container", "rule_runner"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns(
            "__pycache__", "_build_version.py"))
    return dest


@pytest.mark.timeout(300)
@pytest.mark.parametrize("pretend", [None, "2.3.4"])
def test_wheel_built_without_git_gets_the_fallback_or_the_given_version(tmp_path, pretend) -> None:
    for module in ("hatchling", "hatch_vcs"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} (a build requirement) is not installed")
    (tmp_path / "src").mkdir()
    src = _source_tree_without_git(tmp_path / "src")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPTOOLS_SCM_")}
    if pretend:
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = pretend
    out = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out), str(src)], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = pretend or _fallback_version()
    (wheel,) = out.glob("smdebug_lite-*.whl")
    assert wheel.name == f"smdebug_lite-{expected}-py3-none-any.whl"
    written = zipfile.ZipFile(wheel).read("smdebug_lite/_build_version.py").decode()
    assert f"__version__ = {expected!r}" in written
