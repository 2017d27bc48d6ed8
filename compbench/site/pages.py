"""The site's own pages: the index of suites and one page per model across suites (each suite's page is its
leaderboard, report.html's). Every piece of text from a suite or a store passes `html_text`; every link is relative."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from compbench.report.escape import html_text
from compbench.report.html import html_page
from compbench.site.read import SuiteSite

_MARK = {"holds": "✓", "known": "✗ (known)", "departs": "✗"}


def href(*parts: str) -> str:
    """A relative link to a file of the site: each part a safe file name (site.names), percent-quoted all the same."""
    return "/".join(quote(p) for p in parts)


def _findings(s: SuiteSite) -> str:
    if not s.findings:
        return ""
    items = "".join(
        f'<li class="finding {f.status}"><a href="{html_text(href(s.slug, "index.html"))}#findings">'
        f"{html_text(f.expectation)}</a>: <span class=\"verdict {f.status}\">{html_text(_MARK[f.status])}</span> "
        f"{f.n_pass}/{f.n_total} verdicts pass</li>" for f in s.findings)
    return f'<ul class="findings">{items}</ul>'


def _history(s: SuiteSite) -> str:
    if not s.history:
        return ""
    links = ", ".join(f'<a href="{html_text(href(s.slug, p.name + ".png"))}">{html_text(p.caption)}</a>' for p in s.history)
    return f'<p class="note">History over {s.n_runs} runs: {links}.</p>'


def index_page(suites: Sequence[SuiteSite], models: dict[str, str]) -> str:
    """index.html: each suite with its findings, counts, profile, date and commit; then every model's page."""
    rows = []
    for s in suites:
        facts = [("profile", s.profile or "none"), ("results", s.date), ("commit", s.commit), ("from", s.label)]
        dl = "".join(f"<div><dt>{html_text(k)}</dt><dd>{html_text(v)}</dd></div>" for k, v in facts)
        rows.append(
            f'<section aria-labelledby="suite-{html_text(s.slug)}"><h2 id="suite-{html_text(s.slug)}">'
            f'<a href="{html_text(href(s.slug, "index.html"))}">{html_text(s.name)}</a>'
            + (f" ({html_text(s.profile)})" if s.profile else "") + "</h2>"
            f'<p class="headline">{html_text(s.headline)}</p><dl class="facts">{dl}</dl>'
            f"{_findings(s)}{_history(s)}</section>")
    model_links = "".join(f'<li><a href="{html_text(href("models", slug + ".html"))}">{html_text(name)}</a></li>'
                          for name, slug in sorted(models.items(), key=lambda kv: kv[0].lower()))
    body = (f"<header><h1>compbench results: {len(suites)} suite{'s' if len(suites) != 1 else ''}</h1>"
            '<nav aria-label="Sections"><a href="#suites">Suites</a> <a href="#models">Models</a></nav></header><main>'
            '<h2 id="suites">Suites</h2><p class="note">Each suite: its cells and expectations as its last report states '
            "them, its findings (✓ holds, ✗ fails the suite, ✗ (known) fails as the suite declares), the profile its last "
            "run used, when its results were stored and the compbench commit of its last recorded run.</p>"
            + "".join(rows)
            + f'<section aria-labelledby="models"><h2 id="models">Models</h2><p class="note">A model\'s held-out scores '
              f'in every suite that runs it.</p><ul>{model_links}</ul></section></main>')
    return html_page("compbench results", body)


def model_page(name: str, entries: Sequence[tuple[SuiteSite, list]]) -> str:
    """models/<name>.html: the model's held-out score per suite and task, as each suite's leaderboard shows it."""
    rows = []
    for s, cells in entries:
        for c in cells:
            link = href("..", s.slug, "index.html")
            rows.append(
                f'<tr><th scope="row"><a href="{html_text(link)}">{html_text(s.name)}</a></th>'
                f'<td><a href="{html_text(link)}#{html_text(c.anchor)}">{html_text(c.task)}</a></td>'
                f"<td>{html_text(c.metric)}</td><td class=\"score\">{html_text(c.text)}</td>"
                f"<td>{c.n_ok}/{c.n_seeds}</td></tr>")
    table = ('<div class="wrap" tabindex="0" role="region" aria-label="scores (scrolls)"><table><thead><tr>'
             '<th scope="col">suite</th><th scope="col">task</th><th scope="col">metric</th>'
             '<th scope="col">held-out score (mean ± std over seeds)</th><th scope="col">seeds scored</th></tr></thead>'
             f"<tbody>{''.join(rows)}</tbody></table></div>")
    body = (f'<header><p class="home"><a href="../index.html">all suites</a></p><h1>{html_text(name)}</h1></header>'
            '<main><p class="note">Each cell as its suite\'s leaderboard shows it: the held-out metric\'s mean ± std over '
            "seeds, and in brackets the same metric of the model's own kernel-theory prediction where it has one. A task "
            f"links to the cell's seeds in its suite's page.</p>{table}</main>")
    return html_page(f"{name}: across suites", body)
