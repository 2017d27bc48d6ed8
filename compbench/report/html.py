"""One self-contained HTML report: legends, every table (sortable, filterable) and the plots inline.

No external references: the CSS and the small script are inline, plots are base64 PNGs. Tables scroll
inside their own box (so the header row and the model column can stay in view); a print stylesheet
lets every column wrap onto the page instead.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Sequence
from typing import Any

from compbench.report.escape import html_text
from compbench.report.tables import Table

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0 auto;max-width:1500px;padding:.5em 1em 2em;color:#222;
 font-size:16px;line-height:1.4}
h1{font-size:1.5em;margin:.5em 0}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
h1,h2,p,nav,figcaption{overflow-wrap:anywhere}
.about{font-size:1.05em;max-width:1100px}.papers{max-width:1100px}.meaning{font-style:italic}
.warnings{background:#fff4e5;border-left:4px solid #b35c00;padding:.4em .7em;margin:.6em 0}
.headline{font-size:1.05em;background:#f3f6fb;border-left:4px solid #36c;padding:.4em .7em}
nav a{margin-right:1em;display:inline-block}
.filters{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;margin:.6em 0;font-size:14px}
.filters input,.filters select{font:inherit;font-size:14px;padding:2px 4px;max-width:100%}
.wrap{overflow:auto;max-height:80vh;width:fit-content;max-width:100%;margin:.5em 0 1.5em;border:1px solid #ccc}
dl.facts{display:flex;flex-wrap:wrap;gap:.2em 1.4em;margin:.5em 0;font-size:14px}
dl.facts div{display:flex;gap:.4em}dl.facts dt{color:#444}dl.facts dd{margin:0;font-weight:600}
table{border-collapse:separate;border-spacing:0;font-size:13px}
th,td{border-right:1px solid #ccc;border-bottom:1px solid #ccc;padding:3px 8px;text-align:left;white-space:nowrap;
 vertical-align:top}
td.detail{white-space:normal;min-width:16em;max-width:32em}
thead th{background:#eee;position:sticky;top:0;z-index:2}
thead th:first-child{left:0;z-index:3}
tbody th{background:#f7f7f7;position:sticky;left:0;z-index:1;font-weight:600}
th button{font:inherit;font-weight:600;color:inherit;background:none;border:0;padding:0;margin:0;cursor:pointer;text-align:left}
th button:focus-visible{outline:2px solid #36c;outline-offset:2px}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
th a.plot{font-weight:normal;margin-left:.4em}
td a{color:inherit;text-decoration:underline dotted #888;text-underline-offset:2px}td a:hover{text-decoration:underline}
td.best{font-weight:bold;background:#e3f2e3}
td.error,td.missing{color:#900;background:#fbeaea}td.skipped{color:#555;background:#f2f2f2}
td.PASS{color:#060}td.FAIL{color:#900;font-weight:bold}
tr:target th,tr:target td{background:#fff3c4}
.note{color:#444;font-size:14px;max-width:1100px}
figure{margin:1em 0}figcaption{color:#444;font-size:14px}
img{max-width:100%;height:auto;border:1px solid #ddd}
ul.findings{padding-left:1.2em;max-width:1100px}ul.findings li{margin:.35em 0}
li.finding.departs{list-style:"\\2717  "}li.finding.known{list-style:"\\2717  "}li.finding.holds{list-style:"\\2713  "}
.verdict.departs{color:#900;font-weight:bold}.verdict.holds{color:#060}.verdict.known{color:#555}
details.folded summary{cursor:pointer;font-weight:600;margin:.4em 0}
[hidden]{display:none!important}
@media (max-width:600px){body{padding:.3em .6em 1em}h1{font-size:1.3em}.wrap{max-height:70vh}}
@media print{
 body{max-width:none;padding:0;font-size:10pt}
 nav,.filters,.howto,th a.plot{display:none}
 details.folded::details-content{content-visibility:visible;display:contents}
 .wrap{overflow:visible;max-height:none;border:0}
 table{width:100%;font-size:7pt;border-collapse:collapse}
 th,td{white-space:normal;overflow-wrap:anywhere;position:static;padding:1px 3px;border:1px solid #999}
 td.detail{min-width:0}
 th[aria-sort] button::after{content:""}
 tr,figure{break-inside:avoid}h2{break-after:avoid}
 a{color:inherit;text-decoration:none}
}
"""

# Sorting: a header is a button (Enter/Space work); the first click sorts best-first by the column's
# direction (data-dir), the next reverses; numbers (data-v) always before text. Filtering hides rows
# whose data-model / data-task / data-status do not match, and the leaderboard columns of other tasks;
# a filter, and printing, open the folded rows (passing expectations) so what matches is shown.
_JS = """
(function(){
function key(row,i){var c=row.cells[i];var v=c?c.getAttribute('data-v'):null;
  return v===null?[1,c?c.textContent.trim():'']:[0,parseFloat(v)];}
document.querySelectorAll('table.sortable thead th').forEach(function(th){
  var b=th.querySelector('button');if(!b)return;
  b.addEventListener('click',function(){
    var table=th.closest('table'),body=table.tBodies[0];
    var i=Array.prototype.indexOf.call(th.parentNode.children,th);
    var cur=th.getAttribute('aria-sort');
    var first=th.getAttribute('data-dir')==='higher'?'descending':'ascending';
    var order=cur===null?first:(cur==='ascending'?'descending':'ascending');
    table.querySelectorAll('thead th').forEach(function(h){h.removeAttribute('aria-sort');});
    th.setAttribute('aria-sort',order);
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=key(a,i),y=key(b,i);
      if(x[0]!==y[0])return x[0]-y[0];
      var c=x[0]===0?x[1]-y[1]:x[1].localeCompare(y[1]);
      return order==='ascending'?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});
  });});
var fm=document.getElementById('f-model'),ft=document.getElementById('f-task'),fs=document.getElementById('f-status');
function apply(){
  var m=fm.value.trim().toLowerCase(),t=ft.value,s=fs.value;
  document.querySelectorAll('table.sortable tbody tr').forEach(function(r){
    var rm=r.getAttribute('data-model'),rt=r.getAttribute('data-task'),rs=r.getAttribute('data-status');
    var hide=(m&&rm!==null&&rm.toLowerCase().indexOf(m)<0)||(t&&rt!==null&&rt!==t)||
      (s&&rs!==null&&rs.split(' ').indexOf(s)<0);
    r.hidden=!!hide;});
  document.querySelectorAll('[data-col-task]').forEach(function(c){
    c.hidden=!!(t&&c.getAttribute('data-col-task')!==t);});
  if(m||t||s)unfold();
}
[fm,ft,fs].forEach(function(e){if(e){e.addEventListener('input',apply);e.addEventListener('change',apply);}});
function unfold(){document.querySelectorAll('details.folded').forEach(function(d){d.open=true;});}
window.addEventListener('beforeprint',unfold);
var pm=window.matchMedia?window.matchMedia('print'):null;
if(pm&&pm.addEventListener)pm.addEventListener('change',function(e){if(e.matches)unfold();});
})();
"""

_STATUS = {"error", "missing", "skipped", "PASS", "FAIL"}
_PROSE = {"detail", "what it asks", "description"}  # columns of sentences: they wrap instead of widening the table
_BIG = 1.7976931348623157e308  # ±inf sorts as the largest finite float: JavaScript's parseFloat reads "inf" as NaN


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def sort_value(v: float) -> str | None:
    """A finite data-v for a number (±inf → ±max float); None for NaN (sorted with the text)."""
    if math.isnan(v):
        return None
    return repr(math.copysign(_BIG, v) if math.isinf(v) else float(v))


def _attrs(pairs: dict[str, str | None]) -> str:
    return "".join(f' {k}="{html_text(v, quote=True)}"' for k, v in pairs.items() if v is not None and v != "")


def _header(t: Table, j: int, h: str, plot_links: dict[str, str]) -> str:
    task = t.col_tasks.get(j)
    attrs = _attrs({"scope": "col", "data-dir": t.directions.get(j), "data-col-task": task})
    link = f' <a class="plot" href="#{html_text(plot_links[task])}">plot</a>' if task in plot_links else ""
    return f"<th{attrs}><button type=\"button\">{html_text(h)}</button>{link}</th>"


def table_html(t: Table, plot_links: dict[str, str] | None = None) -> str:
    """A sortable, filterable HTML table: numeric cells carry a finite data-v; the first column is a row header."""
    plot_links = plot_links or {}
    has_head = any(t.headers)
    head = "".join(_header(t, j, h, plot_links) for j, h in enumerate(t.headers)) if has_head else ""
    body = []
    for i, row in enumerate(t.rows):
        meta = t.row_meta[i] if i < len(t.row_meta) else {}
        row_attrs = _attrs({"id": t.row_ids.get(i), **{f"data-{k}": v for k, v in meta.items()}})
        cells = []
        for j, c in enumerate(row):
            classes = (["best"] if (i, j) in t.best else []) + ([c] if c in _STATUS else [])
            if t.headers[j] in _PROSE:
                classes.append("detail")
            key = sort_value(t.sort_keys[(i, j)]) if (i, j) in t.sort_keys else None
            attrs = _attrs({"class": " ".join(classes), "data-v": key, "data-col-task": t.col_tasks.get(j)})
            text = html_text(c)
            if (i, j) in t.links and c:
                text = f'<a href="#{html_text(t.links[(i, j)])}">{text}</a>'
            tag = "th" if j == 0 and t.row_header else "td"
            scope = ' scope="row"' if tag == "th" else ""
            cells.append(f"<{tag}{scope}{attrs}>{text}</{tag}>")
        body.append(f"<tr{row_attrs}>{''.join(cells)}</tr>")
    thead = f"<thead><tr>{head}</tr></thead>" if has_head else ""
    label = html_text(t.title)
    return (f'<div class="wrap" tabindex="0" role="region" aria-label="{label} (scrolls)">'
            f'<table class="sortable">{thead}<tbody>{"".join(body)}</tbody></table></div>')


def facts_html(t: Table) -> str:
    """A two-column table without headers (the run summary) as one wrapping line of name: value pairs."""
    items = "".join(f"<div><dt>{html_text(k)}</dt><dd>{html_text(v)}</dd></div>" for k, v, *_ in t.rows)
    return f'<dl class="facts">{items}</dl>'


def _plot_links(plots: Sequence[Any]) -> dict[str, str]:
    """Task id → the id of its first plot (the grid, else the theory scatter)."""
    links: dict[str, str] = {}
    for prefix in ("grid-", "theory-"):
        for p in plots:
            if p.name.startswith(prefix):
                links.setdefault(p.name[len(prefix):], f"plot-{p.name}")
    return links


def _filters(tables: list[Table]) -> str:
    tasks = list(dict.fromkeys(m["task"] for t in tables for m in t.row_meta if m.get("task")))
    statuses = sorted({s for t in tables for m in t.row_meta for s in m.get("status", "").split() if s})
    opt = lambda v: f'<option value="{html_text(v)}">{html_text(v)}</option>'  # noqa: E731
    return (
        '<form class="filters" role="search" aria-label="Filter the tables" onsubmit="return false">'
        '<label for="f-model">Model</label><input id="f-model" type="search" size="14" placeholder="name contains">'
        f'<label for="f-task">Task</label><select id="f-task"><option value="">all tasks</option>{"".join(map(opt, tasks))}</select>'
        f'<label for="f-status">Status</label><select id="f-status"><option value="">any status</option>'
        f'{"".join(map(opt, statuses))}</select></form>'
    )


def table_section_html(t: Table, plot_links: dict[str, str] | None = None) -> str:
    """A table's body: its rows, and the folded ones (e.g. passing expectations) in a <details> behind their count."""
    if not any(t.headers):
        return facts_html(t)
    if not t.folded:
        return table_html(t, plot_links)
    shown = [i for i in range(len(t.rows)) if i not in t.folded]
    head = table_html(t.subset(shown), plot_links) if shown else ""
    return (f'{head}<details class="folded"><summary>{html_text(t.folded_label)}</summary>'
            f"{table_html(t.subset(sorted(t.folded)), plot_links)}</details>")


def html_warnings(warnings: Sequence[str]) -> str:
    """The fit warnings as a block under the header ("" when there are none)."""
    from compbench.report.tables import FIT_NOTE

    if not warnings:
        return ""
    items = "".join(f"<li>{html_text(w)}</li>" for w in warnings)
    return (f'<section class="warnings" role="note" aria-label="Warnings"><p><strong>Warning: {len(warnings)} model/task '
            f"pair(s) did not fit their training cells</strong> ({html_text(FIT_NOTE)})</p><ul>{items}</ul></section>")


def html_page(title: str, body: str) -> str:
    """A self-contained page with the leaderboard's stylesheet: `title` is escaped here, `body` is HTML already escaped."""
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html_text(title)}</title><style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")


def html_report(suite_name: str, tables: list[Table], plots: Sequence[Any] = (), headline: str = "",
                findings: Sequence[Any] | None = None, intro: Any = None, warnings: Sequence[str] = (), home: str = "") -> str:
    """The whole report as one HTML document with no external references.

    `plots` are objects with `name`, `caption` and `png` (bytes), as from `compbench.report.plots.write_plots`;
    `findings` (compbench.report.findings.Finding): the Findings section, first; None leaves it out.
    `intro` (compbench.report.intro.Intro): the suite's description, its papers and what the numbers mean.
    `home`: a relative link to the page listing this one (a site's index), shown above the title; "" for none.
    """
    from compbench.report.findings import FINDINGS_NOTE, html_findings
    from compbench.report.intro import html_intro

    title = f"{html_text(suite_name)}: leaderboard"
    anchors = [(t.anchor or _anchor(t.title), t.title) for t in tables] + ([("plots", "Plots")] if plots else [])
    nav = " ".join(f'<a href="#{a}">{html_text(s)}</a>' for a, s in
                   ([("findings", "Findings")] if findings is not None else []) + anchors)
    links = _plot_links(plots)
    findings_section = "" if findings is None else (
        f'<section aria-labelledby="findings"><h2 id="findings">Findings</h2>'
        f'<p class="note">{html_text(FINDINGS_NOTE)}</p>{html_findings(findings, [p.name for p in plots])}</section>')
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{_CSS}</style></head><body>",
        f'<header><p class="home"><a href="{html_text(home)}">all suites</a></p><h1>{title}</h1>' if home else
        f"<header><h1>{title}</h1>",
        html_intro(intro) if intro is not None else "",
        f'<p class="headline">{html_text(headline)}</p>' if headline else "",
        f'<nav aria-label="Sections">{nav}</nav></header>',
        "<main>",
        html_warnings(warnings),
        findings_section,
        _filters(tables),
        '<p class="note howto">Click a column header (or focus it and press Enter) to sort by it, best first; again to '
        "reverse. A score links to its cell's seeds, kernel and errors; a task's <em>plot</em> link to its plot.</p>",
    ]
    for t, (anchor, _) in zip(tables, anchors):
        parts.append(f'<section aria-labelledby="{anchor}"><h2 id="{anchor}">{html_text(t.title)}</h2>')
        if t.note:
            parts.append(f'<p class="note">{html_text(t.note)}</p>')
        parts.append(table_section_html(t, links) + "</section>")
    if plots:
        parts.append('<section aria-labelledby="plots"><h2 id="plots">Plots</h2>')
        for p in plots:
            data = base64.b64encode(p.png).decode("ascii")
            parts.append(f'<figure id="plot-{html_text(p.name)}"><img alt="{html_text(p.caption)}" '
                         f'src="data:image/png;base64,{data}"><figcaption>{html_text(p.caption)}</figcaption></figure>')
        parts.append("</section>")
    parts.append(f"</main><script>{_JS}</script></body></html>")
    return "\n".join(p for p in parts if p)
