"""``smdebug-train script.py args...`` (``python -m smdebug_lite.container.train`` from a checkout).

Runs an unmodified training script (or ``-m module``) with the hook that SageMaker's
DebugHookConfig asks for ($SMDEBUG_CONFIG_FILE_PATH, else
/opt/ml/input/config/debughookconfig.json; without either file, the same document inline in
$SMDEBUG_HOOK_CONFIG or the ``smdebug_hook_config`` hyperparameter). Frameworks are attached only when the script imports
them (see attachers.py). Debugging is off, and the script runs exactly as it would
without the launcher, when there is no config, when USE_SMDEBUG is 0/false/no/off, or when the
config is unusable; the last case is reported once, naming the key and value.
"""

from __future__ import annotations

import os
import runpy
import sys

from smdebug_lite.config.hook_json import (
    CONFIG_FILE_PATH_ENV,
    HookConfigError,
    config_file_path,
    parse_hook_config,
)
from smdebug_lite.container.attachers import ATTACHERS, Attacher, Closer
from smdebug_lite.container.import_watch import forget, when_imported
from smdebug_lite.container.inline_config import (
    InlineConfigError,
    find_inline_config,
    install_inline_config,
    remove_inline_config,
)
from smdebug_lite.container.sagemaker_entry import EntryPointError, resolve_train_command
from smdebug_lite.hooks.singleton import USE_SMDEBUG_ENV, smdebug_enabled
from smdebug_lite.log.logger import get_logger

logger = get_logger("container.train")

USAGE = "usage: smdebug-train [-m module | script.py | train] [args...]"


def _inline_config(missing: str) -> str | None:
    """The inline configuration (env or hyperparameter) written to a file, if the job has one."""
    try:
        found = find_inline_config()
    except (InlineConfigError, HookConfigError) as e:
        logger.error("smdebug-lite is off for this run: %s", e)
        return None
    if found is None:
        logger.info("No hook configuration at %s: running without smdebug-lite", missing)
        return None
    where, document = found
    path = install_inline_config(document)
    logger.info("No hook configuration at %s: using the one in the %s", missing, where)
    return path


def _config_to_use() -> str | None:
    if not smdebug_enabled():
        logger.info("%s=%s: smdebug-lite is off", USE_SMDEBUG_ENV, os.environ.get(USE_SMDEBUG_ENV))
        return None
    path = config_file_path()
    if not os.path.isfile(path):
        return _inline_config(path)
    try:
        parse_hook_config(path)  # fail early and clearly; frameworks parse it again when attached
    except HookConfigError as e:
        logger.error("smdebug-lite is off for this run: %s", e)
        return None
    return path


def _install(config_path: str, closers: list[Closer]) -> None:
    def make(attacher: Attacher):
        attached = False

        def on_import(_module) -> None:
            nonlocal attached
            if attached:
                return
            attached = True
            closer = attacher.attach(config_path)
            if closer is not None:
                closers.append(closer)

        return on_import

    for attacher in ATTACHERS:
        on_import = make(attacher)
        for module in attacher.modules:
            when_imported(module, on_import)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):  # asked for: the usage on stdout, and success
        print(USAGE)
        return 0
    if not args or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    if args == ["train"] and not os.path.isfile("train"):
        try:
            args = resolve_train_command()
        except EntryPointError as e:
            print(f"smdebug-train: {e}", file=sys.stderr)
            return 2
    as_module = args[0] == "-m"
    target, rest = (args[1], args[2:]) if as_module else (args[0], args[1:])
    closers: list[Closer] = []
    saved_config_env = os.environ.get(CONFIG_FILE_PATH_ENV)
    config_path = _config_to_use()
    inline = config_path is not None and os.environ.get(CONFIG_FILE_PATH_ENV) != saved_config_env
    if config_path is not None:
        _install(config_path, closers)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *rest]
    code = 0
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = _exit_code(e.code)
    finally:
        for close in closers:
            try:
                close()
            except Exception as e:  # closing must not hide the script's own outcome
                logger.error("smdebug-lite could not close its hook: %s", e)
        forget()
        sys.argv, sys.path[:] = saved_argv, saved_path
        if inline:
            remove_inline_config(config_path)
            if saved_config_env is None:
                os.environ.pop(CONFIG_FILE_PATH_ENV, None)
            else:
                os.environ[CONFIG_FILE_PATH_ENV] = saved_config_env
    return code


if __name__ == "__main__":
    raise SystemExit(main())
