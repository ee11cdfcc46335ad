"""Trial tuning knobs, read from the environment once per trial.

smdebug's own variables keep their names; their defaults change where smdebug's behaviour was a
trap (the 1 s sleep after training ends, waiting forever for data that never comes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.exceptions import SMDebugValueError

DEFAULT_TIMEOUT_S = 600.0


def _env_float(name: str, default: float) -> float:
    """A knob set on purpose for analysis: a bad value raises rather than being ignored."""
    return env_float(name, default, minimum=0.0, finite=False, strict=True)


@dataclass(slots=True)
class TrialSettings:
    timeout_s: float  # longest wait for data that has not appeared (create_trial, wait_for_steps)
    poll_interval_s: float  # pause between two looks while waiting
    refresh_interval_s: float  # least time between two unprompted refreshes (misses always refresh)
    end_delay_refresh_s: float  # extra wait before the final refresh, remote storage only
    end_grace_s: float  # after the end marker, how long incomplete steps may still fill in
    incomplete_step_window: int
    missing_event_file_retries: int

    @classmethod
    def from_env(cls, is_local: bool, timeout: float | None = None) -> TrialSettings:
        if timeout is None:
            timeout = _env_float("SMDEBUG_TRIAL_TIMEOUT", DEFAULT_TIMEOUT_S)
        elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise SMDebugValueError(f"timeout={timeout!r} must be a non-negative number of seconds")
        return cls(
            timeout_s=float(timeout),
            poll_interval_s=max(0.01, _env_float("SMDEBUG_TRIAL_POLL_INTERVAL", 0.5)),
            refresh_interval_s=_env_float("SMDEBUG_TRIAL_REFRESH_INTERVAL", 0.0 if is_local else 1.0),
            end_delay_refresh_s=0.0 if is_local else _env_float("SMDEBUG_TRAINING_END_DELAY_REFRESH", 0.0),
            end_grace_s=_env_float("SMDEBUG_TRIAL_END_GRACE", 10.0),
            incomplete_step_window=max(2, int(_env_float("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", 1000))),
            missing_event_file_retries=int(_env_float("SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT", 100)),
        )

    def waited_too_long(self, started: float) -> float | None:
        """Seconds waited since `started` once the timeout is reached, else None."""
        waited = time.monotonic() - started
        return waited if waited >= self.timeout_s else None

    def pause(self, started: float) -> None:
        """One poll interval, cut short at the timeout counted from `started`."""
        left = self.timeout_s - (time.monotonic() - started)
        time.sleep(max(0.0, min(self.poll_interval_s, left)))
