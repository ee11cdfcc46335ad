"""What a user would `pip install` works: scripts/check_wheel.sh end to end (build the sdist and
wheel, twine check, install the wheel alone in a fresh venv, run the alias, console scripts, demo,
report and golden trials from outside the checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_wheel.sh"
EXTRAS = ("torch", "cli", "report")  # the script's default SMDEBUG_WHEEL_EXTRAS
TORCH = "torch==2.13.0"  # the script's default SMDEBUG_TORCH
# pip's words for "the package index cannot give us this", as opposed to a broken requirement.
UNREACHABLE = ("No matching distribution", "Could not find a version", "NewConnectionError",
               "Network is unreachable", "Temporary failure in name resolution",
               "ConnectionError", "ProxyError", "SSLError", "ReadTimeout")


def _requirements() -> list[str]:
    """The build backend, the runtime dependencies and the checked extras."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    extras = project["optional-dependencies"]
    reqs = [*pyproject["build-system"]["requires"], *project["dependencies"],
            *(r for extra in EXTRAS for r in extras[extra])]
    return [TORCH, *(r for r in reqs if not r.startswith("torch"))]


def _skip_unless_installable(tmp_path: Path) -> None:
    """Skip only when pip cannot get a dependency here (no index, no network)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                           "--quiet", "--report", str(tmp_path / "report.json"), *_requirements()],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        message = proc.stdout + proc.stderr
        if any(word in message for word in UNREACHABLE):
            pytest.skip("pip cannot get the wheel's dependencies here: " + message.strip()[-500:])
        pytest.fail("pip cannot resolve the wheel's dependencies:\n" + message)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_check_wheel_script_passes(tmp_path: Path) -> None:
    _skip_unless_installable(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHON=sys.executable, TMPDIR=str(tmp_path))
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=870)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    for stage in ("contents ok:", "installed ok:", "demo ok:", "html ok:", "all checks passed"):
        assert stage in out, (stage, out[-8000:])
    assert "golden answers" in out, "the trials smdebug 1.0.34 wrote were not read"
