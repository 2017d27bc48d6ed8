"""Text from a suite made safe for the programs people open reports in: spreadsheets and markdown viewers.

Every CSV file of a report is made by `csv_text`, every piece of free text in the markdown passes
`md_text` (a table cell `md_cell`): descriptions, component names, labels and model error messages
are text compbench did not write, and a report is opened by people who did not write it either.
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
    """
    from pandas.api.types import is_bool_dtype, is_datetime64_any_dtype, is_numeric_dtype

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
