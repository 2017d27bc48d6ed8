"""One self-contained HTML report: every table (sortable by clicking a header) and the plots inline.

No external references: the CSS and the small sorting script are inline, plots are base64 PNGs.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from typing import Any

from compbench.report.tables import Table

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1500px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
.wrap{overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;white-space:nowrap}
td.detail{white-space:normal;min-width:20em}
th{background:#f0f0f0;cursor:pointer;user-select:none;position:sticky;top:0}
th.asc::after{content:" \\25B2"}th.desc::after{content:" \\25BC"}
td.best{font-weight:bold;background:#e6f4e6}
td.error,td.missing{color:#a00;background:#fbeaea}td.skipped{color:#777;background:#f4f4f4}
td.PASS{color:#070}td.FAIL{color:#a00;font-weight:bold}
.note{color:#555;font-size:13px;max-width:1100px}
figure{margin:1em 0}figcaption{color:#555;font-size:13px}
img{max-width:100%;border:1px solid #ddd}
nav a{margin-right:1em}
"""

# Click a header: sort by that column; numbers (data-v) before text, text alphabetically; click again: reverse.
_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th){
  th.addEventListener('click',function(){
    var table=th.closest('table'),body=table.tBodies[0];
    var i=Array.prototype.indexOf.call(th.parentNode.children,th);
    var asc=!th.classList.contains('asc');
    table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
    th.classList.add(asc?'asc':'desc');
    function key(row){var c=row.cells[i];var v=c.getAttribute('data-v');
      return v===null?[1,c.textContent.trim()]:[0,parseFloat(v)];}
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=key(a),y=key(b);
      if(x[0]!==y[0])return x[0]-y[0];
      var c=x[0]===0?x[1]-y[1]:x[1].localeCompare(y[1]);
      return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});
  });});
"""

_STATUS = {"error", "missing", "skipped", "PASS", "FAIL"}


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def table_html(t: Table) -> str:
    """A sortable HTML table (numeric cells carry their value in data-v)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for i, row in enumerate(t.rows):
        cells = []
        for j, c in enumerate(row):
            classes = (["best"] if (i, j) in t.best else []) + ([c] if c in _STATUS else [])
            if t.headers[j] == "detail":
                classes.append("detail")
            attrs = f' class="{" ".join(classes)}"' if classes else ""
            if (i, j) in t.sort_keys:
                attrs += f' data-v="{t.sort_keys[(i, j)]!r}"'
            cells.append(f"<td{attrs}>{html.escape(c)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="wrap"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def html_report(suite_name: str, tables: list[Table], plots: Sequence[Any] = ()) -> str:
    """The whole report as one HTML document with no external references.

    `plots` are objects with `name`, `caption` and `png` (bytes), as from `compbench.report.plots.write_plots`.
    """
    title = f"{html.escape(suite_name)}: leaderboard"
    sections = [t.title for t in tables] + (["Plots"] if plots else [])
    nav = " ".join(f'<a href="#{_anchor(s)}">{html.escape(s)}</a>' for s in sections)
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head><body>',
        f"<h1>{title}</h1>",
        f"<nav>{nav}</nav>",
        "<p class=\"note\">Click a column header to sort by it; click again to reverse.</p>",
    ]
    for t in tables:
        parts.append(f'<h2 id="{_anchor(t.title)}">{html.escape(t.title)}</h2>')
        if t.note:
            parts.append(f'<p class="note">{html.escape(t.note)}</p>')
        parts.append(table_html(t))
    if plots:
        parts.append('<h2 id="plots">Plots</h2>')
        for p in plots:
            data = base64.b64encode(p.png).decode("ascii")
            parts.append(f'<figure id="plot-{html.escape(p.name)}"><img alt="{html.escape(p.caption)}" '
                         f'src="data:image/png;base64,{data}"><figcaption>{html.escape(p.caption)}</figcaption></figure>')
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts)
