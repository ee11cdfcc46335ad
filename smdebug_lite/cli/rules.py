"""``smdebug-lite rules TRIAL... --rule NAME``: evaluate rules as the rule container would."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from smdebug_lite.cli import console
from smdebug_lite.cli.errors import (
    EXIT_ERROR,
    EXIT_ISSUES_FOUND,
    EXIT_MISSING_FEATURE,
    EXIT_OK,
    fail,
    handled,
)
from smdebug_lite.cli.options import EndStep, Json, Quiet, StartStep

Rules = Annotated[list[str], typer.Option(
    "--rule", help="built-in rule name, or the class name in --rule-file (repeatable)")]
Params = Annotated[list[str] | None, typer.Option(
    "--param", "-p", help="rule parameter KEY=VALUE, given to every rule (repeatable)")]
RuleFile = Annotated[str | None, typer.Option(
    "--rule-file", help="a .py file (or .tar.gz) defining the custom rule classes")]
ActionJson = Annotated[str | None, typer.Option(
    "--action-json", metavar="JSON",
    help="actions run when a rule's condition is met, as the rule container's action_json "
         "(e.g. [{\"name\": \"webhook\", \"url\": \"https://...\"}]); @FILE reads it from a "
         "file, which keeps a webhook URL out of the process list")]


def read_action_json(value: str | None) -> str | None:
    """The action_json text, read from the file when given as @FILE."""
    if value is None or not value.startswith("@"):
        return value
    path = value[1:]
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        fail(f"--action-json {value}: cannot read the file: {e.strerror or e}", EXIT_ERROR)


def parse_params(items: list[str] | None) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--param {item!r}: expected KEY=VALUE", EXIT_ERROR)
        params[key.strip()] = value
    return params


def build_jobs(trials: list[str], rules: list[str], params: dict[str, str],
               rule_file: str | None, start_step: int | None, end_step: int | None,
               action_json: str | None = None, trial_timeout: float | None = None) -> list[Any]:
    from smdebug_lite.distributed import RuleJob

    if start_step is not None and end_step is not None and end_step <= start_step:
        fail(f"--end-step {end_step} must be greater than --start-step {start_step}", EXIT_ERROR)
    return [RuleJob(trial=t, rule=r, params=dict(params), rule_file=rule_file,
                    start_step=start_step, end_step=end_step, action_json=action_json,
                    trial_timeout=trial_timeout)
            for t in trials for r in rules]


def exit_code(statuses: list[str]) -> int:
    """As the rule container: 2 if any rule ended in Error, else 1 if any found issues."""
    if "Error" in statuses:
        return EXIT_ERROR
    return EXIT_ISSUES_FOUND if "IssuesFound" in statuses else EXIT_OK


def rules(trials: Annotated[list[str], typer.Argument(
              metavar="TRIAL...", help="trial directories or s3:// URIs, or prefixes of trials")],
          rule: Rules, param: Params = None, rule_file: RuleFile = None,
          start_step: StartStep = None, end_step: EndStep = None,
          action_json: ActionJson = None,
          engine: Annotated[str, typer.Option(help="local, or ray (a Ray cluster)")] = "local",
          ray_address: Annotated[str | None, typer.Option(help="Ray cluster address")] = None,
          json: Json = False, quiet: Quiet = False) -> None:
    """Evaluate built-in or custom rules and print the statuses the rule container reports,
    one row per trial and rule. Exit code: 0 no issues, 1 issues found, 2 a rule failed.

    Examples:

        smdebug-lite rules ./my-trial --rule VanishingGradient -p threshold=0.0001

        smdebug-lite rules ./run1 ./run2 --rule LossNotDecreasing --rule ExplodingTensor

        smdebug-lite rules ./my-trial --rule MyRule --rule-file my_rules.py --json

        smdebug-lite rules ./my-trial --rule LossNotDecreasing --action-json @actions.json
    """
    from smdebug_lite.distributed import (
        EngineUnavailable,
        evaluate_jobs,
        expand_trials,
        outcome_dict,
    )

    with handled():
        jobs = build_jobs(expand_trials(trials), rule, parse_params(param), rule_file,
                          start_step, end_step, read_action_json(action_json))
        outcomes = []
        with console.step_progress("", quiet or json) as update:

            def progress(job: Any) -> Any:
                if update is None:
                    return None
                label = f"{job.rule} on {job.trial}"
                update(0, None, label)

                def step_done(evaluated: int, step: int) -> None:
                    update(evaluated, None, f"{label}: step {step}")
                return step_done

            try:
                for outcome in evaluate_jobs(jobs, engine=engine, ray_address=ray_address,
                                             progress=progress):
                    outcomes.append(outcome)
            except EngineUnavailable as e:
                fail(str(e), EXIT_MISSING_FEATURE)
    rows = [outcome_dict(o) for o in outcomes]
    if json:
        console.print_json(rows)
    else:
        console.table(None, ["trial", "rule", "status", "step", "details"],
                      [[r["trial"], r["rule"], r["status"], r["step"],
                        _details(r)] for r in rows])
    raise typer.Exit(exit_code([o.status for o in outcomes]))


def _details(row: dict[str, Any]) -> str:
    if row["evidence"]:
        return row["evidence"]
    lines = (row["message"] or "").strip().splitlines()
    return lines[0] if lines else ""
