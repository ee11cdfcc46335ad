"""Rule jobs as Ray tasks: one task per (trial, rule[, step range]), outcomes yielded as tasks
finish.

Each task runs `smdebug_lite.rule_runner.evaluation.evaluate_job`, the local engine's own code,
on a Ray worker, so statuses and messages are the local ones. A task that fails anyway (its worker
dies, an outcome cannot be returned) becomes an Error outcome naming the trial and the rule;
the rest of the batch goes on. The only module of the package that imports Ray.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import ray

from smdebug_lite.rule_runner.evaluation import ERROR, RuleJob, RuleOutcome, evaluate_job

# Environment a worker of an existing cluster gets from the driver: the library's settings
# (trial timeout, manifests, S3 concurrency). A local cluster inherits the whole environment.
FORWARDED_ENV_PREFIX = "SMDEBUG_"
CONNECT_TIMEOUT_S = 10.0


def _is_relative_local(uri: str | None) -> bool:
    return uri is not None and "://" not in uri and not os.path.isabs(os.path.expanduser(uri))


@contextmanager
def _cwd(path: str | None) -> Iterator[None]:
    """Run in `path` when this worker can see it (a cluster on this machine or a shared file
    system), so relative trial paths mean what they meant to the caller, as do messages."""
    if path is None or not os.path.isdir(path):
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def evaluate_in(job: RuleJob, cwd: str | None) -> RuleOutcome:
    """The task body: `evaluate_job` in the caller's working directory when it matters."""
    relative = _is_relative_local(job.trial) or _is_relative_local(job.rule_file)
    with _cwd(cwd if relative else None):
        return evaluate_job(job)


def _failed(job: RuleJob, e: BaseException) -> RuleOutcome:
    from smdebug_lite.rule_runner.status import error_message

    cause = (f"rule {job.rule} on trial {job.trial} failed on the Ray cluster: "
             f"{type(e).__name__}: {e}")
    return RuleOutcome(job.trial, job.rule, ERROR, error_message(cause))


def _check_reachable(address: str) -> None:
    """Fail fast on a head address nobody answers at: Ray itself retries for minutes."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return  # "auto", ray://... : Ray's own resolution
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise ConnectionError(f"cannot reach the Ray cluster at {address!r} ({e}); expected "
                              "the address of a running head node (ray start --head)") from None


def _connect(address: str | None, num_cpus: int | None) -> bool:
    """Connect to `address`, else start a local cluster; True when this call did either (and
    so must disconnect). An existing connection of this process is used as it is."""
    if ray.is_initialized():
        return False
    # Workers' logs stay on the cluster: outcomes carry what a job has to say.
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "logging_level": logging.WARNING}
    if address is not None:
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIX)}
        if env:
            kwargs["runtime_env"] = {"env_vars": env}
        _check_reachable(address)
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)
    return True


def run_jobs(jobs: Iterable[RuleJob], address: str | None = None, *,
             num_cpus: int | None = None) -> Iterator[RuleOutcome]:
    """Outcomes of `jobs` evaluated as Ray tasks, in the order they finish.

    `address` names an existing cluster (``auto``, ``host:6379``, ``ray://host:10001``);
    without it a local cluster is started for these jobs (`num_cpus` CPUs, default all) and
    stopped after them. A process already connected to Ray (``ray.init()`` called) uses that
    connection and keeps it. Trial paths and rule files must be readable where the tasks run:
    ``s3://`` URIs, or paths on a file system every node mounts."""
    jobs = list(jobs)
    if not jobs:
        return
    started = _connect(address, num_cpus)
    pending: dict[Any, RuleJob] = {}
    try:
        task = ray.remote(evaluate_in).options(num_cpus=1, max_retries=1)
        cwd = os.getcwd()
        pending = {task.remote(job, cwd): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as e:
                    yield _failed(job, e)
                    continue
                # Reported under the names the caller used, as the local engine does.
                yield replace(outcome, trial=job.trial, rule=job.rule)
    finally:
        if started:
            ray.shutdown()
        else:
            for ref in pending:  # the caller stopped early: leave their cluster idle
                ray.cancel(ref)
