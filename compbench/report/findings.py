"""The report's opening: one finding per expectation, in the suite's order.

A finding says what the theory predicts (the claim's own description, its parameters filled in, and
the expectation's description), which models follow the prediction, which depart and by how much
(the measured value, the threshold, and the shortfall where the threshold is a plain bound), and
which plot shows it. It is read from the verdicts the outcome judged: the report judges nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compbench.claims.base import needs_text
from compbench.claims import Verdict

MAX_NAMED = 6  # models named per list; the rest are counted ("and 3 more")
MAX_PLOTS = 3  # plots linked per finding


@dataclass(frozen=True)
class Departure:
    """One verdict that fails: who, where, what was measured against which threshold, and by how much."""

    subject: str
    task: str
    measured: float
    threshold: str
    short_by: float | None  # how far the measured value is on the wrong side of the threshold; None when not a plain bound
    known_failure: str = ""  # in the scope of a declared failure: the reason (XFAIL when it fails, XPASS when it passes)
    detail: str = ""
    unexpected_pass: bool = False  # XPASS: it passes where the suite declares a failure, which fails the suite
    warning: str = ""


@dataclass(frozen=True)
class Finding:
    """One expectation's verdicts, summarised for a reader."""

    expectation: str
    claim: str
    predicts: str  # what the theory predicts: the claim's description with its parameters filled in
    note: str  # the expectation's own description ("" when it has none)
    thresholds: tuple[str, ...]  # the distinct thresholds of its verdicts
    n_pass: int
    n_total: int
    follow: tuple[str, ...]  # subjects every verdict of which passes
    follow_tasks: tuple[str, ...]  # the tasks those verdicts are on
    depart: tuple[Departure, ...]
    plots: tuple[str, ...] = field(default=())  # names of the report's plots that show it
    source: str = ""  # where the claim comes from: the paper, figure and number it reproduces

    @property
    def status(self) -> str:
        """holds (every verdict passes), known (only declared failures), departs (a failure that fails the suite)."""
        if self.n_pass == self.n_total:
            return "holds"
        return "known" if all(d.known_failure and not d.unexpected_pass for d in self.depart) else "departs"


def _claim_doc(claim: str) -> tuple[str, Any]:
    from compbench.claims import get_claim

    try:
        obj = get_claim(claim)
    except Exception:  # a claim whose plugin is gone: the verdicts still say what was measured
        return "", None
    doc = (type(obj).__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split()), obj


def _fill(doc: str, claim: Any, params: Any) -> str:
    """The claim's description with each `param` it names replaced by the expectation's value (and the bare word
    "tolerance", as the built-in claims write it)."""

    def value(name: str) -> str | None:
        v = claim.tolerance(params) if name == "tolerance" and claim is not None else getattr(params, name, None)
        if v is None:
            return None
        return f"{v:g}" if isinstance(v, float) else str(v)

    def sub(m: re.Match[str]) -> str:
        return value(m.group(1) or m.group(2)) or m.group(1) or m.group(2)

    return re.sub(r"`(\w+)`|\b(tolerance)\b", sub, doc)


def predicts(expectation: Any) -> str:
    """What an expectation says the theory predicts, from its claim's description and its own parameters."""
    doc, claim = _claim_doc(expectation.claim)
    try:
        params = expectation.claim_params()
    except Exception:  # params the claim refuses: the description unfilled
        params = None
    text = _fill(doc, claim, params).rstrip(".") if doc else expectation.claim
    # The generic words of the metric claims, named: "A statistic of a metric" → "the mean of additivity".
    for word, param in (("statistic", "statistic"), ("metric", "metric")):
        value = getattr(params, param, None)
        if isinstance(value, str) and value:
            text = re.sub(rf"\b[Aa] {word}\b", ("the " if word == "statistic" else "") + value, text, count=1)
    # "Held-out accuracy …" reads on after "predicts:" in lower case; "R² …", "RMSE …" keep their capitals
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first[:1].isupper() and (len(first) == 1 or first[1:].islower()) else text


_BOUND = re.compile(r"^\s*(?P<lhs>.*?)\s*(?P<op>≥|≤|>|<)\s*(?P<bound>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*$")
_DISTANCE = re.compile(r"^\|\s*\w+\s*[−-]\s*(?P<centre>[-+]?(?:\d+\.?\d*|\.\d+))\s*\|$")


def shortfall(measured: float, threshold: str) -> float | None:
    """How far `measured` lies on the wrong side of the threshold's first clause (0 or less: it holds).

    Reads the plain bounds the built-in claims write: `R² ≥ 0.95`, `≥ 0.95`, `each gap > 50`,
    `slope ≤ 0.95, corr ≥ 0.5` (the first clause is about the measured value) and a distance from
    a centre, `|acc − 0.5| ≤ 0.2`. None for anything else, or a measured value that is not finite.
    """
    if not math.isfinite(measured):
        return None
    m = _BOUND.fullmatch(threshold.split(",")[0])
    if not m:
        return None
    bound, lhs = float(m.group("bound")), m.group("lhs")
    value = measured
    if lhs.startswith("|"):
        d = _DISTANCE.fullmatch(lhs)
        if not d:
            return None
        value = abs(measured - float(d.group("centre")))
    return bound - value if m.group("op") in ("≥", ">") else value - bound


def _tasks_of(task: str) -> list[str]:
    """The task ids a verdict's task names ("cd-1 > cd-2 > cd-3" for an ordered claim)."""
    return [t for t in re.split(r"\s*(?:>|≈)\s*", task) if t]


def _plots_for(tasks: Sequence[str], plots: Sequence[str], families: dict[str, str]) -> list[str]:
    """The report's plots that show these tasks: the theory scatter, else the grid, else the context-dependence bars."""
    out: dict[str, None] = {}
    for t in tasks:
        for name in (f"theory-{t}", f"grid-{t}", "cd-blocks" if families.get(t) == "context_dependence" else ""):
            if name and name in plots:
                out[name] = None
                break
    return list(out)[:MAX_PLOTS]


def findings(expectations: Sequence[Any], verdicts: Sequence[Verdict], plots: Sequence[str] = (),
             families: dict[str, str] | None = None) -> list[Finding]:
    """One Finding per expectation that has verdicts, in the suite's order (then any verdicts of unknown expectations).

    `plots`: the report's plot names, to link; `families`: task id → family, in the suite's task order.
    """
    by: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by.setdefault(v.expectation, []).append(v)
    named = {exp.id or f"{exp.claim}-{i + 1}": exp for i, exp in enumerate(expectations)}
    order = [n for n in named if n in by] + [n for n in by if n not in named]
    rank = {t: i for i, t in enumerate(families or {})}  # the suite's task order

    def in_order(tasks: Any) -> tuple[str, ...]:
        return tuple(sorted(dict.fromkeys(tasks), key=lambda t: rank.get(t, len(rank))))

    out = []
    for name in order:
        vs = by[name]
        exp = named.get(name)
        failing = [v for v in vs if v.status != "PASS"]
        bad_subjects = {v.subject for v in failing}
        follow = tuple(dict.fromkeys(v.subject for v in vs if v.subject not in bad_subjects))
        follow_tasks = in_order(v.task for v in vs if v.subject not in bad_subjects)
        depart = tuple(Departure(v.subject, v.task, v.measured, v.threshold, shortfall(v.measured, v.threshold),
                                 v.known_failure, v.detail, v.status == "XPASS", v.warning) for v in failing)
        shown = failing or vs  # a departure is what a reader should see first
        tasks = list(in_order(t for v in shown for t in _tasks_of(v.task)))
        out.append(Finding(
            name, vs[0].claim, predicts(exp) if exp is not None else vs[0].claim,
            " ".join((exp.description if exp is not None else "").split()),
            tuple(dict.fromkeys(v.threshold for v in vs if v.threshold)), sum(v.status == "PASS" for v in vs), len(vs),
            follow, follow_tasks, depart, tuple(_plots_for(tasks, plots, families or {})),
            exp.source.cite() if exp is not None and getattr(exp, "source", None) is not None else ""))
    return out


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    return shown + (f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "")


def _number(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else "not measured"


def departure_text(d: Departure) -> str:
    """'net on te: measured 0.375 (needs … ≥ 0.25; short by 0.125)'; a verdict without a value says why."""
    if not math.isfinite(d.measured):
        return f"{d.subject} on {d.task}: not measured ({d.detail or 'no value'})"
    if d.unexpected_pass:
        return (f"{d.subject} on {d.task}: measured {_number(d.measured)}, which passes ({d.threshold}) although the suite "
                f"declares it a known failure ({d.known_failure}); the declaration is stale, so this fails the suite")
    by = f"; short by {d.short_by:.3g}" if d.short_by is not None and d.short_by > 0 else ""
    known = f" — known failure: {d.known_failure}" if d.known_failure else ""
    warn = f" ({d.warning})" if d.warning else ""
    return f"{d.subject} on {d.task}: measured {_number(d.measured)} ({needs_text(d.threshold, d.measured)}{by}){known}{warn}"


def _sentence(text: str) -> str:
    """The text with its first letter capitalised, unless it starts with a symbol or a mixed-case word (R², RMSE)."""
    first = text.split(" ", 1)[0]
    return text[0].upper() + text[1:] if text and first.replace("-", "").isalpha() and first.islower() else text


def finding_parts(f: Finding) -> list[tuple[str, str]]:
    """A finding as sentences in (kind, text) parts, rendered alike in markdown and HTML.

    "kernel-additive: Held-out additivity R² ≥ 0.95 …. Source: paper, Fig. 3: 0.55. It holds for 5 of 6: a, b (on
    t1, t2). It does not hold for c on t3: measured 0.4 (needs ≥ 0.8; short by 0.4). Plot: theory-t3."
    Kinds: `name` (the expectation id), `status`, `text`, `plot` (a plot's name, a link where the plot exists).
    """
    parts: list[tuple[str, str]] = [("name", f.expectation), ("text", f": {_sentence(f.predicts)}")]
    if len(f.thresholds) == 1 and f.thresholds[0] not in f.predicts:
        parts.append(("text", f"; threshold: {f.thresholds[0]}"))
    parts.append(("text", "."))
    if f.note:
        parts.append(("text", f" {_sentence(f.note.rstrip('.'))}."))
    if f.source:
        parts.append(("text", f" Source: {f.source.rstrip('.')}."))
    n_known = sum(1 for d in f.depart if d.known_failure and not d.unexpected_pass)
    if f.status == "holds":
        status = {1: "It holds", 2: "It holds for both"}.get(f.n_total, f"It holds for all {f.n_total}")
    else:
        status = f"It holds for {f.n_pass} of {f.n_total}"
    parts += [("text", " "), ("status", status)]
    if f.follow:
        parts.append(("text", f": {_names(list(f.follow))} (on {_names(list(f.follow_tasks))})"))
    parts.append(("text", "."))
    if f.depart:
        items = [departure_text(d) for d in f.depart]
        lead = (" As the suite declares, it does not hold for " if n_known == len(f.depart)
                else " It does not hold for ")
        parts.append(("text", lead + "; ".join(items[:MAX_NAMED])
                      + (f"; and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "") + "."))
    if f.plots:
        parts.append(("text", " Plot: "))
        for i, p in enumerate(f.plots):
            parts += ([("text", ", ")] if i else []) + [("plot", p)]
        parts.append(("text", "."))
    return parts


FINDINGS_NOTE = ("What the theory predicts, claim by claim, where each claim comes from (the paper, figure and number "
                 "it reproduces, or compbench's own reading of the theory), which models follow the prediction and which "
                 "depart, by how much: the measured value against the claim's threshold. ✓ holds, ✗ fails the suite, "
                 "✗ (known) fails as the suite declares (XFAIL). Every verdict is in the Expectations table below.")


def markdown_findings(items: Sequence[Finding], plot_files: bool) -> list[str]:
    """The Findings section's markdown lines; `plot_files`: plots/<name>.png exist to link to."""
    from compbench.report.escape import md_text

    lines = ["## Findings", "", FINDINGS_NOTE, ""]
    if not items:
        return lines + ["No expectation was judged (the suite states none, or only part of it ran).", ""]
    for f in items:
        text = []
        for kind, s in finding_parts(f):
            if kind == "name":
                text.append(f"**{md_text(s)}**")
            elif kind == "status":
                text.append(f"**{md_text(s)}**" if f.status == "departs" else md_text(s))
            elif kind == "plot":
                text.append(f"[{md_text(s)}](plots/{s}.png)" if plot_files else md_text(s))
            else:
                text.append(md_text(s))
        mark = {"holds": "✓", "known": "✗ (known)", "departs": "✗"}[f.status]
        lines.append(f"- {mark} " + "".join(text))
    return lines + [""]


def html_findings(items: Sequence[Finding], plot_names: Sequence[str]) -> str:
    """The Findings section's body: a list, each plot name a link to the plot on the page."""
    from compbench.report.escape import html_text

    if not items:
        return '<p class="note">No expectation was judged (the suite states none, or only part of it ran).</p>'
    rows = []
    for f in items:
        text = []
        for kind, s in finding_parts(f):
            e = html_text(s)
            if kind == "name":
                text.append(f"<strong>{e}</strong>")
            elif kind == "status":
                text.append(f'<span class="verdict {f.status}">{e}</span>')
            elif kind == "plot":
                text.append(f'<a href="#plot-{e}">{e}</a>' if s in plot_names else e)
            else:
                text.append(e)
        rows.append(f'<li class="finding {f.status}">{"".join(text)}</li>')
    return f'<ul class="findings">{"".join(rows)}</ul>'
