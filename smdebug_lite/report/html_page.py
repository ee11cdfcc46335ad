"""The report page: one HTML file with inline CSS and images as data URIs, no script.

Every text that came from a trial or a rule is escaped here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from smdebug_lite.format.non_finite import NonFiniteRecord
from smdebug_lite.report.gather import STAT_NAMES, StatsGroup, TrialFacts
from smdebug_lite.report.nonfinite import NonFiniteSearch
from smdebug_lite.report.verdicts import Verdict

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;
color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}header p{margin:0;color:#c9d1d9;font-size:13px}
main{padding:8px 32px 32px;max-width:1200px}
section.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 20px;
margin:16px 0}
h2{font-size:19px;margin:6px 0 10px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto;display:block;margin:6px 0}
.note{color:#57606a;font-size:12px;margin:2px 0 8px}
.none{color:#57606a;font-style:italic}
.status{font-weight:600;padding:1px 8px;border-radius:10px;font-size:12px;white-space:nowrap}
.NoIssuesFound{background:#dafbe1;color:#116329}.IssuesFound{background:#ffebe9;color:#a40e26}
.Error{background:#fff8c5;color:#7d4e00}.InProgress,.Stopped{background:#ddf4ff;color:#0969da}
.alert{border-left:4px solid #cf222e;padding:4px 12px;background:#fff5f5}
.ok{border-left:4px solid #2da44e;padding:4px 12px;background:#f4fff6}
code,.uri{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
ul.evidence{margin:0;padding-left:16px}span.evidence{white-space:pre-line}nav a{margin-right:14px;font-size:13px}
"""


@dataclass
class TrialSection:
    facts: TrialFacts
    nonfinite: NonFiniteSearch
    # where each worker first met a NaN or Inf, as it recorded it (non_finite/), earliest first
    records: list[NonFiniteRecord] = field(default_factory=list)
    records_error: str | None = None
    loss_png: str | None = None
    gradient_png: str | None = None
    group_pngs: dict[str, str] = field(default_factory=dict)


def number(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    return f"{f:.4g}"


def clip(text: str, limit: int = 400) -> str:
    """A long message (a traceback, a rule's report) cut to what fits a table cell."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int] = frozenset()
           ) -> str:
    """Cells are HTML already (callers escape)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers) if headers else ""
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    thead = f"<thead><tr>{head}</tr></thead>" if head else ""
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def _none(text: str) -> str:
    return f'<p class="none">{escape(text)}</p>'


def _note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{escape(alt)}">'


def evidence_html(evidence: Any) -> str:
    if evidence is None or evidence == "" or evidence == {} or evidence == []:
        return ""
    if isinstance(evidence, Mapping):
        items = "".join(f"<li><code>{escape(str(k))}</code>: {escape(number(v))}</li>"
                        for k, v in evidence.items())
        return f'<ul class="evidence">{items}</ul>'
    if isinstance(evidence, (list, tuple)):
        items = "".join(f"<li>{escape(str(v))}</li>" for v in evidence)
        return f'<ul class="evidence">{items}</ul>'
    return f'<span class="evidence">{escape(str(evidence))}</span>'


def rules_section(verdicts: Sequence[Verdict] | None) -> str:
    out = ['<section class="card" id="rules"><h2>Rule verdicts</h2>']
    if not verdicts:
        out.append(_none("No rules were evaluated for this report."))
    else:
        rows = [(f'<span class="uri">{escape(v.trial)}</span>', escape(v.rule),
                 f'<span class="status {escape(v.status)}">{escape(v.status)}</span>',
                 "" if v.step is None else str(v.step), escape(clip(v.message)),
                 evidence_html(v.evidence)) for v in verdicts]
        out.append(_table(("trial", "rule", "status", "step", "message", "evidence"), rows,
                          {3}))
    out.append("</section>")
    return "".join(out)


def summary_html(f: TrialFacts) -> str:
    modes = ", ".join(f"{m}: {n}" for m, n in f.steps_per_mode.items()) or "none"
    colls = ", ".join(f"{escape(c)} ({n})" for c, n in f.collections.items()) or "none"
    rows = [
        ("location", f'<span class="uri">{escape(f.uri)}</span>'),
        ("steps per mode", escape(modes)),
        ("first / last step", f"{number(f.first_step)} / {number(f.last_step)}"),
        ("workers", escape(", ".join(f.workers)) or "none"),
        ("tensors", str(f.tensor_count)),
        ("collections (tensors)", colls),
        ("training ended", "yes" if f.ended else "no (the trial may still be growing)"),
    ]
    return _table((), [(f"<b>{k}</b>", v) for k, v in rows])


def losses_html(s: TrialSection) -> str:
    curves = s.facts.losses
    if not curves or s.loss_png is None:
        return _none("Losses not saved (no tensor in the losses collection).")
    thinned = [c for c in curves if len(c.steps) < c.total_steps]
    note = ""
    if thinned:
        note = _note(f"Long curves are drawn through {len(thinned[0].steps)} evenly spaced steps "
                     "of their saved steps.")
    last = [(escape(c.tensor), escape(c.mode), str(c.total_steps), number(c.values[0]),
             number(c.values[-1])) for c in curves]
    return (_img(s.loss_png, "loss curves per mode") + note
            + _table(("tensor", "mode", "steps saved", "first", "last"), last, {2, 3, 4}))


def gradients_html(s: TrialSection) -> str:
    heat = s.facts.gradients
    if heat is None or s.gradient_png is None:
        return _none("Gradients not saved (no tensor in the gradients collection).")
    notes = []
    if len(heat.steps) < heat.total_steps:
        notes.append(f"{len(heat.steps)} evenly spaced steps of {heat.total_steps}.")
    if len(heat.layers) < heat.total_layers:
        notes.append(f"First {len(heat.layers)} layers of {heat.total_layers}.")
    notes.append("Grey: not saved at that step. Darkest: vanishing (or exactly zero).")
    return _img(s.gradient_png, "gradient norm heatmap") + _note(" ".join(notes))


def group_html(group: StatsGroup | None, png: str | None, what: str) -> str:
    if group is None or png is None:
        return _none(f"{what} not saved.")
    rows = [(escape(ts.tensor), escape("x".join(map(str, ts.shape)) if ts.shape else "-"),
             str(ts.total_steps), *(number(ts.last(k)) for k in STAT_NAMES))
            for ts in group.tensors]
    note = ""
    if len(group.tensors) < group.total_tensors:
        note = _note(f"First {len(group.tensors)} tensors of {group.total_tensors}.")
    return (_img(png, f"{what} statistics") + note
            + _note("Statistics at the last saved step:")
            + _table(("tensor", "shape", "steps saved", *STAT_NAMES), rows, {2, 3, 4, 5, 6, 7}))


def nonfinite_html(search: NonFiniteSearch) -> str:
    if search.findings:
        first = search.findings[0]
        rows = [(escape(x.tensor), str(x.step), escape(x.mode),
                 "" if x.mode_step is None else str(x.mode_step), escape(x.worker),
                 "some" if x.nan is None else str(x.nan),
                 "some" if x.inf is None else str(x.inf), escape(x.source))
                for x in search.findings]
        return (f'<div class="alert"><p>First NaN/Inf at step <b>{first.step}</b> '
                f"({escape(first.mode)} step {number(first.mode_step)}), worker "
                f"<code>{escape(first.worker)}</code>, in <code>{escape(first.tensor)}</code>."
                "</p></div>"
                + _table(("tensor", "step", "mode", "mode step", "worker", "NaN", "Inf",
                          "found from"), rows, {1, 3, 5, 6}))
    how = ", ".join(sorted(search.sources)) or "nothing readable"
    if search.total_steps == 0:
        return _none("No steps saved.")
    if not search.complete:
        return (f'<div class="ok"><p>No NaN or Inf in the first {search.steps_searched} of '
                f"{search.total_steps} steps; the search stopped there to stay bounded "
                f"(checked with {escape(how)}).</p></div>")
    return (f'<div class="ok"><p>No NaN or Inf in any of the {search.total_steps} steps '
            f"(checked with {escape(how)}).</p></div>")


def records_html(records: Sequence[NonFiniteRecord], error: str | None) -> str:
    """The workers' own records of where a NaN or Inf first appeared (phase, module, tensor),
    shown before the search of the saved data."""
    if error:
        return f'<div class="alert"><p>Non-finite record unreadable: {escape(error)}</p></div>'
    if not records:
        return ""
    first = records[0]
    where = f" in module <code>{escape(first.module)}</code>" if first.module else ""
    rows = [(str(r.step), escape(r.mode), str(r.mode_step), escape(r.worker), escape(r.phase),
             escape(r.module), escape(r.tensor), str(r.nan), str(r.posinf), str(r.neginf))
            for r in records]
    return (f'<div class="alert"><p>Recorded during training: the first non-finite value was '
            f"met at step <b>{first.step}</b> ({escape(first.mode)} step {first.mode_step}), "
            f"worker <code>{escape(first.worker)}</code>, in the {escape(first.phase)} "
            f"phase{where}, tensor <code>{escape(first.tensor)}</code>.</p></div>"
            + _table(("step", "mode", "mode step", "worker", "phase", "module", "tensor", "NaN",
                      "+Inf", "-Inf"), rows, {0, 2, 7, 8, 9})
            + _note("In the saved data:"))


def trial_section(index: int, s: TrialSection) -> str:
    f = s.facts
    return "".join([
        f'<section class="card" id="trial-{index}"><h2>Trial <code>{escape(f.name)}</code></h2>',
        "<h3>Summary</h3>", summary_html(f),
        "<h3>Loss per mode</h3>", losses_html(s),
        "<h3>Gradient norm per layer</h3>", gradients_html(s),
        "<h3>Weights</h3>", group_html(f.weights, s.group_pngs.get("weights"), "Weights"),
        "<h3>Activations</h3>",
        group_html(f.activations, s.group_pngs.get("activations"), "Activations"),
        "<h3>First NaN / Inf</h3>", records_html(s.records, s.records_error),
        nonfinite_html(s.nonfinite),
        "</section>",
    ])


def page(sections: Sequence[TrialSection], verdicts: Sequence[Verdict] | None,
         generated: str, version: str) -> str:
    names = ", ".join(s.facts.name for s in sections)
    nav = "".join(f'<a href="#trial-{i}">{escape(s.facts.name)}</a>'
                  for i, s in enumerate(sections, 1))
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>smdebug-lite report: {escape(names)}</title><style>{STYLE}</style></head>",
        "<body><header><h1>smdebug-lite report</h1>",
        f"<p>{len(sections)} trial(s): {escape(names)} &middot; generated {escape(generated)}"
        f" by smdebug-lite {escape(version)}</p></header><main>",
        f'<nav><a href="#rules">Rule verdicts</a>{nav}</nav>',
        rules_section(verdicts),
        *(trial_section(i, s) for i, s in enumerate(sections, 1)),
        "</main></body></html>\n",
    ])
