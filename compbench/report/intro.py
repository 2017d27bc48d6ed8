"""The report's opening lines: what the suite tests, the papers its claims come from, and what held-out and theory mean.

Read from the suite alone (its description and its expectations' sources), so a reader who opens a
leaderboard knows what the numbers below are before reading any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WHAT_IT_MEANS = ("Each model is trained on the training cells of each task (combinations of components it sees) and "
                 "scored on the held-out cells: combinations it never saw. Held-out scores are on those cells. The "
                 "theory is the prediction of the model's own kernel, fit on the same training cells: what a model "
                 "with a fixed representation (a kernel machine, a lazy network) must output there; a model that "
                 "departs from it has learned a representation of its own. Each claim below says what the theory "
                 "or a paper predicts and where the claim comes from.")


@dataclass(frozen=True)
class Paper:
    """A paper some claim of the suite reproduces: its citation and, where the suite gives one, a link."""

    name: str
    url: str = ""


@dataclass(frozen=True)
class Intro:
    """The suite's description, the papers its claims cite, and the sentence on held-out and theory."""

    description: str
    papers: tuple[Paper, ...]
    meaning: str = WHAT_IT_MEANS


def intro(loaded: Any) -> Intro:
    """The opening of a report for a loaded suite (papers in the order the claims first cite them)."""
    papers: dict[str, str] = {}
    for exp in loaded.suite.expectations:
        src = getattr(exp, "source", None)
        if src is None or src.is_compbench:
            continue
        name = " ".join(src.paper.split())
        if not papers.get(name):
            papers[name] = src.url
    return Intro(" ".join((loaded.suite.description or "").split()), tuple(Paper(n, u) for n, u in papers.items()))


def _md_url(url: str) -> str:
    return url.replace("(", "%28").replace(")", "%29")


def markdown_intro(it: Intro) -> list[str]:
    """The opening as markdown lines (under the title)."""
    from compbench.report.escape import md_text

    lines = [md_text(it.description), ""] if it.description else []
    if it.papers:
        cites = [f"[{md_text(p.name)}]({_md_url(p.url)})" if p.url else md_text(p.name) for p in it.papers]
        lines += ["Papers tested: " + "; ".join(cites) + ".", ""]
    return lines + [f"*{md_text(it.meaning)}*", ""]


def html_intro(it: Intro) -> str:
    """The opening as HTML (inside the page's header)."""
    from compbench.report.escape import html_text

    parts = [f'<p class="about">{html_text(it.description)}</p>'] if it.description else []
    if it.papers:
        cites = [f'<a href="{html_text(p.url, quote=True)}" rel="noopener">{html_text(p.name)}</a>' if p.url
                 else html_text(p.name) for p in it.papers]
        parts.append(f'<p class="papers">Papers tested: {"; ".join(cites)}.</p>')
    parts.append(f'<p class="note meaning">{html_text(it.meaning)}</p>')
    return "".join(parts)
