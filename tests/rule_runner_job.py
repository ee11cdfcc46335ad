"""What every rule-runner test job shares: a private opt-ml root, the runner's environment and
readers of the files the runner leaves there (message, failure, the rule's status file)."""

from __future__ import annotations

import json
import os
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
