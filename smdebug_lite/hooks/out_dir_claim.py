"""One writer per local out_dir: processes that each believe they are the only worker must not
interleave files in it.

The first process to create ``claim.smd`` (holding its pid) writes; the others stay silent. A
claim left by a process that is gone is taken over. Distributed runs (each worker names its
files) and S3 out_dirs (no exclusive create there) need no claim.
"""

from __future__ import annotations

import contextlib
import os

from smdebug_lite.format.locations import CLAIM_FILE
from smdebug_lite.log.logger import get_logger
from smdebug_lite.storage import Storage

logger = get_logger(__name__)


class OutDirClaim:
    """This process's claim on one out_dir (see the module docstring)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.held = False  # this object created the claim (and removes it on `release`)

    def take(self) -> bool:
        """True when this process may write into the out_dir."""
        storage, me = self.storage, os.getpid()
        for _ in range(2):
            if storage.create_new(CLAIM_FILE, str(me).encode()):
                self.held = True
                return True
            owner = self._owner()
            if owner == me:
                return True
            if owner and pid_alive(owner):
                logger.warning("Another process (pid %d) is writing to %s; this process will "
                               "not save tensors there", owner, storage.uri())
                return False
            storage.delete(CLAIM_FILE)  # (its owner is gone)
        return False

    def release(self) -> None:
        if self.held:
            self.held = False
            with contextlib.suppress(OSError):
                self.storage.delete(CLAIM_FILE)

    def _owner(self) -> int:
        try:
            return int(self.storage.read(CLAIM_FILE).decode().strip() or "0")
        except (OSError, ValueError):
            return 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


__all__ = ["OutDirClaim", "pid_alive"]
