"""Shared helpers for the benchmarks: the reference venv and result formatting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from refvenv import ref_python  # noqa: E402


def run_reference(code: str, *args: str, timeout: int = 1800) -> dict | None:
    """Run `code` with real smdebug 1.0.34; it must print one JSON object as its last line."""
    py, reason = ref_python()
    if py is None:
        print(f"[reference venv unavailable: {reason}]")
        return None
    proc = subprocess.run([py, "-c", code, *args], capture_output=True, text=True, cwd="/tmp",
                          timeout=timeout)
    if proc.returncode != 0:
        print(f"[reference run failed]\n{proc.stderr[-2000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio(baseline: float | None, ours: float) -> str:
    if baseline is None or ours <= 0:
        return "n/a"
    return f"{baseline / ours:.1f}x"
