"""A trial in a local directory."""

from __future__ import annotations

import os
from typing import Any

from smdebug_lite.exceptions import SMDebugValueError
from smdebug_lite.storage import LocalStorage
from smdebug_lite.trials.trial import Trial


class LocalTrial(Trial):
    def __init__(self, name: str, dirname: str, range_steps: Any = None, **kwargs: Any) -> None:
        path = os.path.expanduser(dirname)
        # A path that does not exist yet is waited for (training may not have started); one
        # that exists as something else never becomes a trial.
        if os.path.exists(path) and not os.path.isdir(path):
            what = "a file" if os.path.isfile(path) else "not a directory"
            raise SMDebugValueError(
                f"{path} is {what}, not a trial directory; expected the out_dir the hook wrote "
                "(with collections/, index/ and events/ in it)")
        super().__init__(name, LocalStorage(dirname), range_steps, **kwargs)
        self.trial_dir = path

    def _index_token_root(self) -> str:
        return os.path.join(self.trial_dir, "")
