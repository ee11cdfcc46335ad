"""Library logging, configured from smdebug's environment variables.

Every record passes the credential filter (`smdebug_lite.log.redact`): it is attached to the
library's root logger, to each handler the library adds, and to every logger handed out by
`get_logger` (a logger's own filters do not run for records logged on its children).
"""

from __future__ import annotations

import logging
import os
import socket
import sys

from smdebug_lite.config.env_settings import env_bool
from smdebug_lite.log.redact import redacting_filter, register_from_environment

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "off": logging.CRITICAL + 10,
}
_ROOT = "smdebug_lite"
_configured = False


def _configure() -> None:
    global _configured
    if _configured:
        return
    _configured = True
    register_from_environment()
    root = logging.getLogger(_ROOT)
    root.addFilter(redacting_filter())
    level = _LEVELS.get(os.environ.get("SMDEBUG_LOG_LEVEL", "info").strip().lower(), logging.INFO)
    root.setLevel(level)
    context = os.environ.get("SMDEBUG_LOG_CONTEXT") or f"{socket.gethostname()}:{os.getpid()}"
    fmt = logging.Formatter(f"[%(asctime)s.%(msecs)03d {context} %(levelname)s %(name)s] %(message)s",
                            "%Y-%m-%d %H:%M:%S")
    all_to_stdout = env_bool("SMDEBUG_LOG_ALL_TO_STDOUT", True)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(fmt)
    if not all_to_stdout:
        out.addFilter(lambda r: r.levelno < logging.ERROR)
        err = logging.StreamHandler(sys.stderr)
        err.setLevel(logging.ERROR)
        err.setFormatter(fmt)
        root.addHandler(err)
    root.addHandler(out)
    if os.environ.get("SMDEBUG_LOG_PATH"):
        fh = logging.FileHandler(os.environ["SMDEBUG_LOG_PATH"])
        fh.setFormatter(fmt)
        root.addHandler(fh)
    for handler in root.handlers:
        handler.addFilter(redacting_filter())
    root.propagate = False


def get_logger(name: str = _ROOT) -> logging.Logger:
    """A logger under the library root, so one env var controls all of it."""
    _configure()
    if name != _ROOT and not name.startswith(_ROOT + "."):
        name = f"{_ROOT}.{name}"
    logger = logging.getLogger(name)
    logger.addFilter(redacting_filter())  # no-op when already there
    return logger
