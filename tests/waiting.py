"""Waiting for what another thread or process does: poll for the condition under a generous
deadline instead of sleeping a fixed time first. The tests run under pytest-xdist with more
workers than cores, where a background thread or a low-priority child can lag by seconds;
a test whose code works still passes at once."""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 60.0


def wait_until(predicate: Callable[[], object], timeout: float = DEFAULT_TIMEOUT_S,
               what: str = "the condition", interval: float = 0.05) -> None:
    """Return once `predicate()` is true; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout:g} s")
        time.sleep(interval)
