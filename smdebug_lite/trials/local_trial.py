"""A trial in a local directory."""

from __future__ import annotations

import os
from typing import Any

from smdebug_lite.storage import LocalStorage
from smdebug_lite.trials.trial import Trial


class LocalTrial(Trial):
    def __init__(self, name: str, dirname: str, range_steps: Any = None, **kwargs: Any) -> None:
        super().__init__(name, LocalStorage(dirname), range_steps, **kwargs)
        self.trial_dir = os.path.expanduser(dirname)

    def _index_token_root(self) -> str:
        return os.path.join(self.trial_dir, "")
