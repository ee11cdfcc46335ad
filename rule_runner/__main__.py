"""Command line of the rule evaluator: ``smdebug-rule-runner`` or
``python -m smdebug_lite.rule_runner``.

In the container no flags are needed: RuleParameters arrive as environment variables and
``/opt/ml/config/processingjobconfig.json``. Flags exist for local runs and override both.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Sequence

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.log.redact import (
    RedactingStream,
    redact,
    redacting_filter,
    register_from_environment,
    register_secrets,
)
from smdebug_lite.rule_runner import EXIT_ERROR
from smdebug_lite.rule_runner.params import (
    ACTION_JSON,
    BASE_TRIAL,
    END_STEP,
    OPT_ML_ENV,
    OUTPUT_DIR_ENV,
    RULE_CONFIGURATION_NAME,
    RULE_TO_INVOKE,
    SOURCE,
    START_STEP,
    TRIAL_TIMEOUT_ENV,
    ConfigError,
    RunnerConfig,
    build_config,
)

WAIT_LOG_ENV = "SM_RULE_WAIT_LOG_S"  # how often to log "waiting for data" (default 30 s)

_EPILOG = f"""\
environment (RuleParameters): {RULE_TO_INVOKE}, {SOURCE}, {BASE_TRIAL}, other_trial_<N>,
other_trials, {START_STEP}, {END_STEP}, {ACTION_JSON}, and any parameter named in the rule's
constructor. Also: {OPT_ML_ENV} (root instead of /opt/ml), {OUTPUT_DIR_ENV},
{TRIAL_TIMEOUT_ENV}, {WAIT_LOG_ENV}, RULE_CONFIGURATION_NAME.

exit codes: 0 NoIssuesFound, 1 IssuesFound, 2 Error, 128+signal Stopped (143 for SIGTERM).
"""


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {redact(text)!r}")
    return key.strip(), value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="smdebug-rule-runner",
        description="Evaluate one SageMaker Debugger rule on a trial, as a rule-evaluator "
                    "container does.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rule-to-invoke", "--rule", dest=RULE_TO_INVOKE, metavar="CLASS",
                   help="rule class name (a built-in rule unless --source is given)")
    p.add_argument("--source", dest=SOURCE, metavar="URI",
                   help="custom rule code: .py or .tar.gz, s3:// URI or local path")
    p.add_argument("--base-trial", dest=BASE_TRIAL, metavar="URI",
                   help="trial to evaluate (s3:// URI or path); default: the mounted "
                        "<opt-ml>/processing/input/tensors")
    p.add_argument("--other-trial", dest="other_trial", action="append", default=[],
                   metavar="URI", help="another trial, for rules comparing runs (repeatable)")
    p.add_argument("--start-step", dest=START_STEP, metavar="N")
    p.add_argument("--end-step", dest=END_STEP, metavar="N", help="exclusive")
    p.add_argument("--action-json", dest=ACTION_JSON, metavar="JSON")
    p.add_argument("--param", "-p", dest="params", action="append", default=[],
                   type=_key_value, metavar="KEY=VALUE", help="a rule parameter (repeatable)")
    p.add_argument("--rule-configuration-name", "--name", dest=RULE_CONFIGURATION_NAME,
                   metavar="NAME", help="names the status file; default: the rule class")
    p.add_argument("--opt-ml", metavar="DIR", help=f"root instead of /opt/ml (env {OPT_ML_ENV})")
    p.add_argument("--output-dir", metavar="DIR",
                   help="status JSON folder; default <opt-ml>/processing/output/rule")
    p.add_argument("--trial-timeout", type=float, metavar="SECONDS",
                   help="longest wait for data that has not appeared: the first data, the "
                        f"next step, a step the rule waits for (env {TRIAL_TIMEOUT_ENV}; "
                        "default 3600); then the job ends as Error")
    p.add_argument("--stop-grace", type=float, default=5.0, metavar="SECONDS",
                   help="after SIGTERM, how long to wait for the current step (default 5)")
    p.add_argument("--log-level", default=os.environ.get("SMDEBUG_LOG_LEVEL", "info"),
                   help="debug, info, warning, error (default: SMDEBUG_LOG_LEVEL or info)")
    return p.parse_args(argv)


def _setup_logging(level: str) -> None:
    logger = logging.getLogger("rule_runner")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(
            "[%(asctime)s.%(msecs)03d rule_runner %(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
        handler.addFilter(redacting_filter())
        logger.addHandler(handler)
        logger.propagate = False
    logger.addFilter(redacting_filter())
    logger.setLevel(getattr(logging, level.strip().upper(), logging.INFO))


def _scrub_standard_streams() -> None:
    """Credentials never leave this process: text that bypasses logging (a rule's print(), an
    uncaught exception in a thread) is scrubbed on its way to stdout/stderr too."""
    register_from_environment()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))


def _unwritable_output(cfg: RunnerConfig, err: OSError) -> int:
    """The status files are the job's only way to report: say clearly why they cannot be
    written (typically a folder mounted into the container that its user may not write to),
    instead of a traceback whose exit code reads like IssuesFound."""
    from smdebug_lite.rule_runner.status import atomic_write_text, error_message

    uid = os.getuid() if hasattr(os, "getuid") else None
    cause = (f"cannot write the job's output files ({err.strerror or err}: {err.filename}); "
             f"{cfg.output_dir} and {cfg.message_file.parent} must be writable"
             + (f" by the user the job runs as (uid {uid})" if uid is not None else ""))
    logging.getLogger("rule_runner").error("ClientError: %s", cause)
    try:
        atomic_write_text(cfg.message_file, error_message(cause))
    except OSError:
        pass  # the message file's folder is not writable either; the log says it all
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run one rule job and return its exit code (see `rule_runner` for the codes)."""
    from smdebug_lite.rule_runner.runner import make_report, run_job
    from smdebug_lite.rule_runner.source import ensure_smdebug_alias
    from smdebug_lite.rule_runner.status import Outcome

    _scrub_standard_streams()
    args = parse_args(argv)
    register_secrets(dict(args.params))
    _setup_logging(args.log_level)
    ensure_smdebug_alias()
    log = logging.getLogger("rule_runner")
    cli = {k: getattr(args, k) for k in (RULE_TO_INVOKE, SOURCE, BASE_TRIAL, START_STEP,
                                         END_STEP, ACTION_JSON, RULE_CONFIGURATION_NAME)}
    for i, trial in enumerate(args.other_trial):
        cli[f"other_trial_{i}"] = trial
    cli.update(dict(args.params))
    try:
        cfg = build_config(cli_params=cli, opt_ml=args.opt_ml, output_dir=args.output_dir,
                           trial_timeout=args.trial_timeout)
    except ConfigError as e:
        # Still report through the files SageMaker reads, at the default locations.
        log.error("%s", e)
        try:
            cfg = build_config(environ={k: v for k, v in os.environ.items()
                                        if k in (OPT_ML_ENV, OUTPUT_DIR_ENV)
                                        or k.lower() == RULE_CONFIGURATION_NAME.replace("_", "")
                                        or k in (RULE_CONFIGURATION_NAME, RULE_TO_INVOKE,
                                                 "RULE_CONFIGURATION_NAME")},
                               cli_params={RULE_TO_INVOKE: cli.get(RULE_TO_INVOKE),
                                           RULE_CONFIGURATION_NAME: cli.get(RULE_CONFIGURATION_NAME)},
                               opt_ml=args.opt_ml, output_dir=args.output_dir)
            make_report(cfg).write_final(Outcome.error(str(e), e))
        except (ConfigError, OSError) as e2:
            log.error("cannot write the status files: %s", e2)
        return EXIT_ERROR
    log.info("Rule job configuration: %s", cfg.summary())
    wait_log_s = env_float(WAIT_LOG_ENV, 30.0)
    try:
        outcome, _ = run_job(cfg, stop_grace_s=args.stop_grace, wait_log_s=wait_log_s)
    except OSError as e:
        return _unwritable_output(cfg, e)
    if any(t.name == "rule-job" and t.is_alive() for t in threading.enumerate()):
        # The worker is stuck in a blocking call; don't let interpreter shutdown wait on it.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(outcome.exit_code)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
