"""Which writer process this training process writes through: started on first use, replaced
once after it dies (`MAX_RESTARTS`), and not inherited by a forked child.

``SMDEBUG_WRITER=thread`` keeps writing in-process; so does a platform without memfd and file
descriptor passing, and a writer process that cannot start (`writer.choice`).
"""

from __future__ import annotations

import os
import socket
import threading

from smdebug_lite.log.logger import get_logger
from smdebug_lite.writer.process.handle import WriterProcess
from smdebug_lite.writer.process.shared_arena import shared_memory_supported

logger = get_logger(__name__)

WRITER_CHOICES = ("process", "thread")
# How many times a training process starts a new writer process after one died; then a thread.
MAX_RESTARTS = 1

_instance: WriterProcess | None = None
_unavailable: str | None = None
_restarts = 0  # writer processes started because one died
_warned_choices: set[str] = set()
_start_lock = threading.Lock()


def writer_process() -> WriterProcess | None:
    """This process's writer process, started on first use; None where writes stay in-process."""
    choice = os.environ.get("SMDEBUG_WRITER", "process").strip().lower()
    if choice == "thread":
        return None
    if choice not in WRITER_CHOICES and choice not in _warned_choices:
        _warned_choices.add(choice)
        logger.warning("SMDEBUG_WRITER=%r is not one of %s; using the writer process", choice,
                       "/".join(WRITER_CHOICES))
    if _usable(_instance):
        return _instance
    with _start_lock:
        return _start_unless_usable()


def replacement_for(dead: WriterProcess) -> WriterProcess | None:
    """The writer process to use instead of `dead`: the current one if it is alive (another
    writer may have started it already), a new one while restarts are left, else None."""
    if os.environ.get("SMDEBUG_WRITER", "process").strip().lower() == "thread":
        return None
    with _start_lock:
        if _instance is not dead and _usable(_instance):
            return _instance
        return _start_unless_usable()


def _start_unless_usable() -> WriterProcess | None:
    """(Under `_start_lock`.) The live writer process, else a new one if this process may
    start one: once, plus `MAX_RESTARTS` after deaths."""
    global _instance, _unavailable, _restarts
    if _usable(_instance):
        return _instance
    if _unavailable is not None:
        return None
    if not shared_memory_supported() or not hasattr(socket, "send_fds"):
        _unavailable = "no memfd or fd passing on this platform"
        return None
    restart = _instance is not None and _instance.pid_owner == os.getpid()
    if restart:
        if _restarts >= MAX_RESTARTS:
            _unavailable = f"{_instance.dead}, after {_restarts} restart(s)"
            return None
        _restarts += 1
    try:
        _instance = WriterProcess(find_replacement=replacement_for)
    except Exception as e:
        _unavailable = str(e)
        logger.warning("smdebug-lite could not start its writer process (%s); tensors are "
                       "written by a thread of the training process instead", e)
        return None
    return _instance


def _usable(proc: WriterProcess | None) -> bool:
    """Started by this process (not inherited through fork) and still alive."""
    return proc is not None and proc.pid_owner == os.getpid() and not proc.dead


def _forget_after_fork() -> None:
    """A forked child (a DataLoader worker, say) starts its own writer process if it writes;
    it closes its copy of the parent's socket so the writer process still sees the parent exit."""
    global _instance, _restarts
    if _instance is not None:
        try:
            _instance.channel.close()
        except OSError:
            pass
    _instance = None
    _restarts = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
