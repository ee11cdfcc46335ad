"""Ending a run on disk when the training process ends without `close()`.

Readers (`invoke_rule`, real-time trials, the rule runner) wait for `training_job_end.ts` to
learn that no step is coming any more, and a hook's last saved step is handed over only when the
next one starts or the hook closes. So every hook still open is closed:

- at interpreter exit (`atexit`): a script that never calls `close()`, or ends with an
  uncaught exception;
- on SIGTERM, which SageMaker (and `docker stop`, and most job schedulers) send to stop a job.
  The handler is installed once per process, by the first hook made in the main thread, only
  where SIGTERM is handled from Python or not at all (a process that ignores SIGTERM keeps
  ignoring it). It closes the open hooks, then hands the signal on: to the handler that was
  there before, or, if there was none, to the default action, so the process still ends
  "killed by SIGTERM" (exit status 143 in a shell). A handler the script installs later
  replaces ours, and ours is never put back over it. ``SMDEBUG_HANDLE_SIGTERM=0`` turns it off.

A signal handler runs on the main thread between two bytecodes, possibly in the middle of the
hook's own work (a message half sent to the writer process). So the hooks are closed by another
thread, which waits for any lock the interrupted code holds, and the handler waits for that
thread at most ``SMDEBUG_SIGTERM_CLOSE_TIMEOUT_S`` seconds (default 60). If closing takes longer
(the interrupted code held a lock it cannot give back now), only the end marker is written.

A forked child (a DataLoader or `multiprocessing` worker) has no open hooks, so it gets the
handler that was there before ours back. A handler written in Python runs only between two
bytecodes: a child forked while another thread held a lock in C code, stuck on that lock, would
otherwise ignore the SIGTERM its parent sends to end it, and the parent would wait forever.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from typing import TYPE_CHECKING, Any

from smdebug_lite.config.env_settings import env_bool, env_float
from smdebug_lite.hooks import registry
from smdebug_lite.log.logger import get_logger

if TYPE_CHECKING:
    from smdebug_lite.hooks.core import HookCore

logger = get_logger(__name__)

DEFAULT_CLOSE_TIMEOUT_S = 60.0

_install_tried = False
_previous_handler: Any = None


def track(hook: HookCore) -> None:
    """`hook` is open: close it at exit or on SIGTERM if nobody else does."""
    registry.track(hook)
    _install_sigterm_handler()


forget = registry.forget
live_hooks = registry.live_hooks


@atexit.register
def _close_live_hooks() -> None:
    """The last step appears only once written: close every hook still open at exit."""
    for hook in live_hooks():
        with contextlib.suppress(Exception):
            hook.close()


def _install_sigterm_handler() -> None:
    global _install_tried, _previous_handler
    if _install_tried or threading.current_thread() is not threading.main_thread():
        return  # (signal handlers can only be installed from the main thread)
    _install_tried = True
    if not env_bool("SMDEBUG_HANDLE_SIGTERM", True):
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN or previous is None:  # (None: installed outside Python)
        return
    _previous_handler = previous
    signal.signal(signal.SIGTERM, _on_sigterm)


def _give_back_sigterm_in_forked_child() -> None:
    """A hook the child makes installs ours again; a handler that replaced ours stays."""
    global _install_tried, _previous_handler
    if _previous_handler is None or signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        return  # (never installed, or replaced since: not ours to change, nor to put back)
    with contextlib.suppress(ValueError, OSError):  # (not the main thread: nothing to give back)
        signal.signal(signal.SIGTERM, _previous_handler)
        _install_tried, _previous_handler = False, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_give_back_sigterm_in_forked_child)


def _close_timeout_s() -> float:
    return env_float("SMDEBUG_SIGTERM_CLOSE_TIMEOUT_S", DEFAULT_CLOSE_TIMEOUT_S, above=0.0)


def _on_sigterm(signum: int, frame: Any) -> None:
    hooks = live_hooks()
    if hooks:
        logger.info("smdebug-lite: SIGTERM received; closing %d hook(s) before the process ends",
                    len(hooks))
        closer = threading.Thread(target=_close_all, args=(hooks,), daemon=True,
                                  name="smdebug-lite-sigterm-close")
        closer.start()
        timeout = _close_timeout_s()
        closer.join(timeout)
        if closer.is_alive():
            logger.warning("smdebug-lite: closing the hooks did not finish within %.0fs of "
                           "SIGTERM; writing only the end marker", timeout)
        # A hook still open now was being closed by the code the signal interrupted (or the
        # closer gave up): its end marker at least.
        for hook in live_hooks():
            with contextlib.suppress(Exception):
                hook.mark_training_end()
    previous = _previous_handler
    if callable(previous):
        previous(signum, frame)
        return
    # The default action, as if we had never been there: the process ends killed by SIGTERM.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _close_all(hooks: list[HookCore]) -> None:
    for hook in hooks:
        try:
            hook.close()
        except Exception as e:  # (close reports its own failures; this is a last resort)
            logger.error("smdebug-lite could not close the hook of %s on SIGTERM: %s",
                         getattr(hook, "out_dir", "?"), e)


__all__ = ["forget", "live_hooks", "track"]
