"""One self-contained HTML report: every table (sortable by clicking a header) and the plots inline."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from compbench.report.tables import Table

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0;cursor:pointer;user-select:none}
td.best{font-weight:bold;background:#eef7ee}
.note{color:#555;font-size:13px;max-width:1000px}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
"""

_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th){
  th.addEventListener('click',function(){
    var table=th.closest('table'),body=table.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th);
    var asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      var x=a.cells[i].textContent.trim(),y=b.cells[i].textContent.trim();
      var nx=parseFloat(x),ny=parseFloat(y);
      var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
      return asc?c:-c;});
    rows.forEach(function(r){body.appendChild(r);});
  });});
"""


def table_html(t: Table) -> str:
    """A sortable HTML table."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for i, row in enumerate(t.rows):
        cells = "".join(
            f'<td class="best">{html.escape(c)}</td>' if (i, j) in t.best else f"<td>{html.escape(c)}</td>"
            for j, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def html_report(suite_name: str, tables: list[Table], plots: Sequence[Path] = ()) -> str:
    """The whole report as one HTML document with no external references."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(suite_name)}: leaderboard</title>",
             f"<style>{_CSS}</style></head><body><h1>{html.escape(suite_name)}: leaderboard</h1>"]
    for t in tables:
        parts.append(f"<h2>{html.escape(t.title)}</h2>")
        if t.note:
            parts.append(f'<p class="note">{html.escape(t.note)}</p>')
        parts.append(table_html(t))
    if plots:
        parts.append("<h2>Plots</h2>")
        for p in plots:
            data = base64.b64encode(Path(p).read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{html.escape(Path(p).stem)}" src="data:image/png;base64,{data}"></figure>')
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts)
