"""Where rule jobs run: one after another in this process ("local"), or as tasks on a Ray
cluster ("ray"). Both run `smdebug_lite.rule_runner.evaluation.evaluate_job`, so a job ends
with the same status and message on either engine."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from smdebug_lite.rule_runner.evaluation import RuleJob, RuleOutcome, StepProgress, evaluate_job


class EngineUnavailable(RuntimeError):
    """The requested evaluation engine cannot run here (its package is missing)."""


def evaluate_jobs(jobs: Iterable[RuleJob], engine: str = "local",
                  ray_address: str | None = None, *,
                  progress: Callable[[RuleJob], StepProgress | None] | None = None
                  ) -> Iterator[RuleOutcome]:
    """Outcomes of `jobs`: one after another here ("local"), or on a Ray cluster ("ray", in
    completion order). `progress(job)` may give a step callback for each local job."""
    if engine == "local":
        for job in jobs:
            yield evaluate_job(job, progress(job) if progress is not None else None)
        return
    if engine == "ray":
        try:
            # Ray is optional and slow to import: only this engine loads it.
            from smdebug_lite.distributed.ray_engine import run_jobs
        except ImportError as e:
            raise EngineUnavailable(
                f"engine 'ray' is not available here ({e}); install Ray "
                "(pip install ray) or use engine='local'"
            ) from None
        yield from run_jobs(list(jobs), address=ray_address)
        return
    raise ValueError(f"engine={engine!r} is not an engine; expected 'local' or 'ray'")
