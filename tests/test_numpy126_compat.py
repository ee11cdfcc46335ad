"""The format and config layers also work on numpy 1.26 (the oldest numpy we support) and on
protobuf 7 (the main test venv has protobuf 6, which the SageMaker SDK test dependency needs).

Builds a small side venv once (numpy 1.26.4, protobuf 7.x) and runs those test modules in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _build_lock import build_lock

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("SMDEBUG_NP126_VENV", "/tmp/smdebug-lite-np126"))
MODULES = ["tests/test_tensor_codec.py", "tests/test_format_golden.py", "tests/test_save_config.py",
           "tests/test_reduction_config.py", "tests/test_collections.py"]


def _venv_python() -> str:
    with build_lock(VENV):
        return _built_venv_python()


def _built_venv_python() -> str:
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run(
        [str(py), "-c", "import numpy, pytest, crc32c, ml_dtypes, google.protobuf as p; "
         "assert numpy.__version__ == '1.26.4' and p.__version__.startswith('7.')"],
        capture_output=True).returncode == 0
    if not ok:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        proc = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "numpy==1.26.4", "protobuf>=7.35,<8", "boto3",
             "crc32c", "ml_dtypes>=0.5", "pytest", "pytest-timeout"],
            capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            pytest.skip(f"could not build a numpy 1.26 venv: {proc.stderr[-800:]}")
    return str(py)


@pytest.mark.slow
def test_format_and_config_on_numpy_1_26():
    py = _venv_python()
    proc = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODULES],
                          cwd=str(REPO), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
