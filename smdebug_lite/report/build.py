"""`write_report`: trials (and optionally rule jobs) in, one self-contained HTML file out."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from smdebug_lite.exceptions import NonFiniteRecordDamaged, TrialDataTimeout
from smdebug_lite.report import plots
from smdebug_lite.report.gather import Progress, gather
from smdebug_lite.report.html_page import TrialSection, page
from smdebug_lite.report.nonfinite import first_nonfinite
from smdebug_lite.report.verdicts import Verdict, evaluate

OPEN_TIMEOUT_S = 10.0  # how long an empty location may take to show a trial


class ReportError(ValueError):
    """A trial location that holds no trial, or an unusable output path."""


def _is_remote(uri: str) -> bool:
    return uri.startswith("s3://")


def open_trial(uri: str) -> Any:
    """The trial at `uri`, failing fast: a report reads what is there and never waits."""
    from smdebug_lite.trials import create_trial

    if not isinstance(uri, str) or not uri.strip():
        raise ReportError(f"trial location {uri!r} is empty; expected a path or s3://bucket/prefix")
    if not _is_remote(uri):
        path = Path(uri)
        if not path.is_dir():
            raise FileNotFoundError(f"trial {uri!r}: no such directory")
        if not (path / "index").is_dir() and not (path / "collections").is_dir():
            raise ReportError(f"trial {uri!r} holds no smdebug trial (expected the folders "
                              "'index' and 'collections' written by a hook)")
    try:
        return create_trial(uri, timeout=OPEN_TIMEOUT_S)
    except TrialDataTimeout as e:
        raise ReportError(f"trial {uri!r}: no trial data appeared there ({e})") from e


def _stderr_progress(enabled: bool) -> Progress:
    def say(message: str) -> None:
        if enabled:
            print(f"[report] {message}", file=sys.stderr, flush=True)

    return say


def _step_progress(say: Progress, every: int = 100) -> Callable[[int, int], None]:
    def on_step(evaluated: int, step: int) -> None:
        if evaluated % every == 0:
            say(f"  {evaluated} steps evaluated (step {step})")

    return on_step


def _section(trial: Any, uri: str, say: Progress) -> TrialSection:
    facts = gather(trial, uri, say)
    say("NaN/Inf search")
    section = TrialSection(facts, first_nonfinite(trial, say))
    try:
        section.records = trial.non_finite_records()
    except NonFiniteRecordDamaged as e:
        section.records_error = str(e)
    say("plots")
    if facts.losses:
        section.loss_png = plots.loss_figure(facts.losses)
    if facts.gradients is not None:
        section.gradient_png = plots.gradient_figure(facts.gradients)
    for key, group in (("weights", facts.weights), ("activations", facts.activations)):
        if group is not None:
            section.group_pngs[key] = plots.stats_figure(group)
    return section


def _version() -> str:
    try:
        from smdebug_lite import __version__
    except ImportError:
        return "unknown"
    return str(__version__)


def write_report(trial_uris: list[str], out_path: str, rules: list | None = None,
                 progress: bool = False) -> Path:
    """Write the HTML report of `trial_uris` to `out_path` and return its path.

    `rules` are rule jobs (fields trial, rule, params, rule_file, start_step, end_step); each
    is evaluated on the saved steps and listed with its status, step and evidence.
    Raises FileNotFoundError / ReportError for a missing or empty trial location, and
    `plots.MissingDependency` (an ImportError) when matplotlib is not installed.
    """
    if isinstance(trial_uris, str) or not isinstance(trial_uris, Sequence) or not trial_uris:
        raise ReportError(f"trial_uris={trial_uris!r}: expected a non-empty list of trial "
                          "locations")
    out = Path(out_path)
    if out.is_dir():
        raise ReportError(f"out_path {str(out)!r} is a directory; expected an .html file path")
    plots._figure(1, 1)  # a missing matplotlib is reported before any trial is read
    say = _stderr_progress(progress)
    sections = []
    for i, uri in enumerate(trial_uris, 1):
        say(f"trial {i}/{len(trial_uris)}: {uri}")
        sections.append(_section(open_trial(uri), uri, lambda m, i=i: say(f"trial {i}: {m}")))
    verdicts: list[Verdict] | None = None
    if rules:
        verdicts = []
        for n, job in enumerate(rules, 1):
            say(f"rule {n}/{len(rules)}: {job.rule} on {job.trial}")
            verdicts.append(evaluate(job, _step_progress(say) if progress else None))
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    html = page(sections, verdicts, generated, _version())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    say(f"wrote {out} ({len(html) // 1024} KiB)")
    return out
