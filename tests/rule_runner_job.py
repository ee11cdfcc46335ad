"""What every rule-runner test job shares: a private opt-ml root, the runner's environment and
readers of the files the runner leaves there (message, failure, the rule's status file)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class OptMlJob:
    """One rule job's opt-ml root (created empty) and the files the runner writes under it."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        self.opt_ml = tmp_path / "opt_ml"
        self.opt_ml.mkdir()
        self.name = name

    @staticmethod
    def base_env(home: Path) -> dict[str, str]:
        """The runner's environment without the caller's: short polls keep the tests quick."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "HOME": str(home),
            "SMDEBUG_RULE_POLL_INTERVAL_S": "0.1",
            "SMDEBUG_TRIAL_POLL_INTERVAL": "0.1",
        }

    @property
    def status_file(self) -> Path:
        return self.opt_ml / "processing" / "output" / "rule" / f"{self.name}.json"

    def status_text(self) -> str:
        return self.status_file.read_text()

    def status(self) -> dict[str, Any]:
        return json.loads(self.status_text())

    def message(self) -> str | None:
        p = self.opt_ml / "output" / "message"
        return p.read_text() if p.exists() else None

    def failure(self) -> str | None:
        p = self.opt_ml / "output" / "failure"
        return p.read_text() if p.exists() else None


# A private /opt/ml for one process: a new mount namespace with `opt_ml` bound over /opt/ml,
# what `docker run -v opt_ml:/opt/ml` gives a container. Needs root or CAP_SYS_ADMIN.
PRIVATE_OPT_ML_SCRIPT = (
    'set -e; mount --make-rprivate /; mkdir -p /opt/ml; mount --bind "$1" /opt/ml; '
    'shift; exec "$@"'
)


def with_private_opt_ml(opt_ml: Path, argv: list[str]) -> list[str]:
    """`argv` run with `opt_ml` mounted at /opt/ml, visible to that process only."""
    return ["unshare", "-m", "sh", "-c", PRIVATE_OPT_ML_SCRIPT, "sh", str(opt_ml), *argv]


def private_opt_ml_problem(probe_dir: Path) -> str | None:
    """Why a private /opt/ml cannot be made here, or None when it can."""
    (probe_dir / "marker").write_text("x")
    try:
        proc = subprocess.run(with_private_opt_ml(probe_dir, ["test", "-e", "/opt/ml/marker"]),
                              capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "unshare(1) is not installed; these tests need a private /opt/ml mount"
    if proc.returncode != 0:
        return ("unshare -m with a bind mount over /opt/ml is not permitted here (needs root or "
                f"CAP_SYS_ADMIN): {proc.stderr.strip()}")
    return None
