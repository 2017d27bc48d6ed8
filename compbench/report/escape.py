"""Text from a suite made safe for the programs people open reports in: spreadsheets and markdown viewers.

Every CSV file of a report is made by `csv_text`, every piece of free text in the markdown passes
`md_text` (a table cell `md_cell`): descriptions, component names, labels and model error messages
are text compbench did not write, and a report is opened by people who did not write it either.
predictions.parquet is not escaped: a spreadsheet does not open parquet, and pandas reads its text as data, so the
labels stay as written there (`predictions-csv`, the same rows as text, goes through `csv_text`).
"""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np

from compbench.controls import strip_controls

# A spreadsheet evaluates a cell starting with one of these as a formula (OWASP: CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain number is read as a number, not a formula: "-4" stays "-4" (a label like a negative value).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def csv_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with `'`; anything else unchanged.

    A carriage return inside text becomes a line feed: the CSV writer quotes a cell holding a line
    feed, but not a bare CR, which a spreadsheet reads as a new row (whose first cell could be `=...`).
    """
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        value = "'" + value
    return value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value


def csv_text(frame: Any) -> str:
    """A pandas DataFrame as CSV text, every text cell and column name passed through `csv_cell`.

    The text is written by the report's one writer (`ReportContext.write_file`: atomic, contained).
    It is the bytes `frame.to_csv(index=False)` writes after escaping; a frame of numbers and text is
    written a column at a time (`_columns_csv`), each distinct text escaped and quoted once (pandas'
    row writer took 2.7 s of predictions.csv's 4.9 s, 757k rows of kernel-limits; the predictions are now parquet).
    """
    from pandas.api.types import is_bool_dtype, is_datetime64_any_dtype, is_numeric_dtype

    fast = _columns_csv(frame)
    if fast is not None:
        return fast
    frame = frame.rename(columns=csv_cell)
    # Numeric columns hold no text: a negative number is written as it is. Any other column (object,
    # pandas' string dtype) may hold text next to numbers; each of its text cells is checked.
    text = [c for i, c in enumerate(frame.columns)
            if not (is_numeric_dtype(frame.iloc[:, i]) or is_bool_dtype(frame.iloc[:, i]) or is_datetime64_any_dtype(frame.iloc[:, i]))]
    if text:
        frame = frame.copy()
        for i, c in enumerate(frame.columns):
            if c in text:
                frame.isetitem(i, _escaped(frame.iloc[:, i]))
    return frame.to_csv(index=False)


def _columns_csv(frame: Any) -> str | None:
    """`csv_text` of a frame whose columns are numpy numbers or booleans and text, built a column at a time; None for
    any other frame (dates, nullable or categorical columns, unhashable cells, one column), which pandas writes.

    The cells are pandas' own: numbers as numpy's `astype(str)` (to_csv's), NaN and missing text empty, other
    objects as the csv module writes them; each distinct text is escaped (`csv_cell`) and quoted by the csv module
    itself (`_quoted`), so quoting is to_csv's (QUOTE_MINIMAL) whatever the text holds.
    """
    import os

    import pandas as pd

    rows, width = frame.shape
    if width < 2 or rows == 0 or frame.columns.nlevels > 1:  # a lone empty field is quoted ('""'): pandas knows the rule
        return None
    columns: list[list[str]] = []
    for i in range(width):
        column = frame.iloc[:, i]
        dtype = column.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "iub":
            columns.append(column.to_numpy().astype(str).tolist())
        elif isinstance(dtype, np.dtype) and dtype.kind == "f":
            values = column.to_numpy()
            cells = values.astype(str).astype(object)
            cells[np.isnan(values)] = ""
            columns.append(cells.tolist())
        elif dtype == object or isinstance(dtype, pd.StringDtype):
            try:
                codes, uniques = pd.factorize(column.to_numpy(dtype=object), use_na_sentinel=True)
            except TypeError:  # unhashable cells (lists)
                return None
            texts = np.empty(len(uniques) + 1, dtype=object)
            texts[:-1] = [csv_cell(u) for u in uniques]
            texts[-1] = None  # codes of -1 (missing) pick the last entry
            columns.append(_quoted(texts)[codes].tolist())
        else:
            return None
    header = np.empty(width, dtype=object)
    header[:] = [csv_cell(c) for c in frame.columns]
    lines = [",".join(_quoted(header).tolist())]
    lines.extend(map(",".join, zip(*columns)))
    end = os.linesep  # to_csv's line terminator
    return end.join(lines) + end


def _quoted(cells: Any) -> Any:
    """Each cell (text, None: empty, any other object) as the csv module writes it in a row (QUOTE_MINIMAL)."""
    import csv
    import io
    import os

    out = np.empty(len(cells), dtype=object)
    for k, cell in enumerate(cells):
        buf = io.StringIO()
        # Beside a second field: a row of one empty field would be quoted, a cell among others is not.
        csv.writer(buf, lineterminator=os.linesep).writerow([cell, ""])
        out[k] = buf.getvalue()[:-len(os.linesep) - 1]
    return out


def _escaped(column: Any) -> Any:
    # Each distinct value is checked once: a predictions column repeats a few labels over ~10^6 rows.
    import pandas as pd

    try:
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
    except TypeError:  # unhashable cells (lists): each is checked
        return column.map(csv_cell)
    if not len(uniques):
        return column
    mapped = np.empty(len(uniques), dtype=object)
    mapped[:] = [csv_cell(u) for u in uniques]
    values = column.to_numpy(dtype=object, copy=True)
    present = codes >= 0
    values[present] = mapped[codes[present]]
    return pd.Series(values, index=column.index, name=column.name, dtype=object)


# A link or an image needs `]` right before `(` (inline), `[` (reference) or `:` (a definition a
# shortcut `[label]` would use); each such `]` is escaped, and every backslash first, so that a
# backslash in the text cannot un-escape it. `<...>` autolinks and raw HTML are escaped as HTML.
_LINK_CLOSE = re.compile(r"\](?=[(\[:])")


def html_text(text: str, quote: bool = True) -> str:
    """Untrusted text made safe for HTML: terminal control sequences dropped, then HTML-escaped (the one way text enters the page)."""
    return html.escape(strip_controls(str(text)), quote=quote)


def md_text(text: str) -> str:
    """Free text for a markdown line: no control sequences, no live link, image or HTML, line breaks as spaces."""
    flat = strip_controls(" ".join(html.escape(str(text), quote=False).splitlines()))
    return _LINK_CLOSE.sub(r"\\]", flat.replace("\\", "\\\\"))


def md_cell(text: str) -> str:
    """Free text for a markdown table cell: `md_text`, with `|` escaped so the row keeps its columns."""
    return md_text(text).replace("|", "\\|")
