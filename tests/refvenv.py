"""Locate (or build) the reference virtualenv with real smdebug 1.0.34 for cross-checks.

The venv lives outside the repo (default /tmp/smdref, override with SMDEBUG_REF_VENV). It is built
with scripts/make_ref_venv.sh when missing. Tests that need it call `ref_python()` and skip
with the build log's tail as the reason only when it cannot be built.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from _build_lock import build_lock

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "make_ref_venv.sh"
VENV = Path(os.environ.get("SMDEBUG_REF_VENV", "/tmp/smdref"))
_lock = threading.Lock()
_result: tuple[str | None, str] | None = None


def _usable(py: Path) -> bool:
    if not py.exists():
        return False
    probe = subprocess.run([str(py), "-c", "import smdebug, numpy, torch"], capture_output=True)
    return probe.returncode == 0


def ref_python() -> tuple[str | None, str]:
    """(path to the reference python or None, reason when None). Builds the venv once."""
    global _result
    with _lock, build_lock(VENV):
        if _result is not None:
            return _result
        py = VENV / "bin" / "python"
        if not _usable(py):
            if not SCRIPT.exists():
                _result = (None, f"reference venv script not found at {SCRIPT}")
                return _result
            env = dict(os.environ, WITH_XGBOOST=os.environ.get("WITH_XGBOOST", "1"))
            proc = subprocess.run(["bash", str(SCRIPT), str(VENV)], capture_output=True,
                                  text=True, env=env, timeout=1200)
            if proc.returncode != 0 or not _usable(py):
                tail = (proc.stdout + proc.stderr)[-1500:]
                _result = (None, f"reference venv could not be built: {tail}")
                return _result
        _result = (str(py), "")
        return _result


def run_ref(code: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run python code in the reference venv (cwd outside the repo so our packages don't shadow)."""
    py, reason = ref_python()
    if py is None:
        raise RuntimeError(reason)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return subprocess.run([py, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, cwd="/tmp", env=env)
