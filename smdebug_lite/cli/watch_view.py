"""What ``smdebug-lite watch`` shows: a rich live panel, or plain lines for logs and CI."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from smdebug_lite.cli.live_trial import LiveState
from smdebug_lite.cli.rule_watch import RuleProgress
from smdebug_lite.cli.sparkline import sparkline

_STYLE = {"NoIssuesFound": "green", "IssuesFound": "bold red", "Error": "yellow",
          "Stopped": "cyan", "InProgress": "blue", "Waiting": "dim"}


def steps_text(state: LiveState) -> str:
    modes = ", ".join(f"{m} {n}" for m, n in state.modes().items())
    text = f"step {state.last_step}, {state.steps} saved"
    return text + (f" ({modes})" if modes else "")


def rate_text(state: LiveState) -> str:
    return "-" if state.rate is None else f"{state.rate:.3g} steps/s"


def loss_text(state: LiveState) -> str | None:
    if not state.loss:
        return None
    step, value = state.loss[-1]
    return f"{state.loss_name} = {value:.6g} ({state.loss_mode} step {step})"


def rule_text(p: RuleProgress) -> str:
    """``NAME: STATUS`` with the steps evaluated, where the condition was met and why."""
    text = f"rule {p.name}: {p.status}"
    out = p.outcome
    if out is not None and out.step is not None:
        text += f" at step {out.step}"
    n = p.steps_evaluated
    text += f" ({n} step{'' if n == 1 else 's'} evaluated"
    if p.last_step is not None:
        text += f", last step {p.last_step}"
    text += ")"
    detail = p.detail()
    return text + (f": {detail}" if detail else "")


def panel(uri: str, state: LiveState, rules: list[RuleProgress], started: float,
          timeout_s: float, idle_s: float) -> Group:
    """The live view: header, steps per worker and mode, rate, loss, non-finite, rules."""
    elapsed = time.monotonic() - started
    if not state.opened:
        what = f"waiting for the trial ({idle_s:.0f}s of {timeout_s:g}s)"
    elif state.ended:
        what = "training ended"
    else:
        what = f"running (no new data for {idle_s:.0f}s; timeout {timeout_s:g}s)"
    parts: list[Any] = [Text.assemble(("watch ", "bold"), (uri, "cyan"),
                                      f"  {what}, {elapsed:.0f}s")]
    if state.opened:
        parts.append(Text(f"{steps_text(state)}   rate {rate_text(state)}"))
        if state.per_worker_mode:
            t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
            for c in ("worker", "mode", "steps saved", "last step", "last mode step"):
                t.add_column(c, justify="left" if c in ("worker", "mode") else "right")
            for (worker, mode), wm in sorted(state.per_worker_mode.items()):
                t.add_row(worker, mode, str(wm.steps), str(wm.last_step), str(wm.last_mode_step))
            parts.append(t)
        loss = loss_text(state)
        if loss is not None:
            parts.append(Text.assemble("loss ", (loss, "bold"), "  ",
                                       sparkline([v for _, v in state.loss], width=40)))
    if state.non_finite is not None:
        parts.append(Text(f"first NaN/Inf: {state.non_finite.describe()}", style="bold red"))
    if state.problem:
        parts.append(Text(f"read failed (retrying): {state.problem}", style="yellow"))
    if rules:
        t = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        for c in ("rule", "status", "evaluated", "last step", "details"):
            t.add_column(c, overflow="fold")
        for p in rules:
            step = p.outcome.step if p.outcome is not None and p.outcome.step is not None else None
            t.add_row(p.name, Text(p.status + (f" at {step}" if step is not None else ""),
                                   style=_STYLE.get(p.status, "")),
                      str(p.steps_evaluated), "" if p.last_step is None else str(p.last_step),
                      p.detail())
        parts.append(t)
    return Group(*parts)


def progress_line(state: LiveState) -> str:
    """One plain line: steps, per-worker steps, rate and loss."""
    workers: dict[str, int] = {}
    for (worker, _), wm in state.per_worker_mode.items():
        workers[worker] = max(workers.get(worker, -1), wm.last_step)
    parts = [steps_text(state), "workers " + ", ".join(f"{w} at {s}"
                                                       for w, s in sorted(workers.items())),
             f"rate {rate_text(state)}"]
    loss = loss_text(state)
    if loss is not None:
        parts.append(f"loss {loss}")
    return " | ".join(parts)
