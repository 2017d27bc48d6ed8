"""How a stored row becomes a CellRecord: the columns every reader selects, and the checks that name a damaged row.

A record's LAZY_FIELDS (its arrays and parameters, most of its bytes) are left out of what Python decodes when SQLite
can drop them (json_remove); the record decodes them from the row's JSON when first read (CellRecord.from_stored).
"""

from __future__ import annotations

import json

from typing import Any

from compbench.records import RECORD_SCHEMA, CellRecord
from compbench.records.cell import _FIELD_SET, _FIELDS, LAZY_FIELDS, StoredRow


def read(text: str, light: str | None = None, token: str = "") -> CellRecord:
    """A stored record, migrated from the schema it was written with; ValueError or TypeError if damaged.

    `light`: the row less its LAZY_FIELDS, of the current record schema with those fields of the right types
    (ROW's SQL checked them), so that they are left for the record to decode when first read.
    """
    data = json.loads(text if light is None else light)
    if not isinstance(data, dict):
        raise TypeError(f"a JSON {type(data).__name__}, not an object")
    try:
        if light is None:
            record = CellRecord.from_dict(data)
            record.stored_row = StoredRow(token, None) if token else None
        else:
            record = CellRecord.from_stored(data, text, token)
    except (KeyError, AttributeError, TypeError) as exc:  # a field missing, or of a type from_dict cannot read
        raise TypeError(f"{type(exc).__name__}: {exc}") from None
    for name, types in FIELD_TYPES.items():
        if light is not None and name in LAZY_FIELDS:
            continue
        value = getattr(record, name)
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            raise TypeError(f"field {name!r} is a {type(value).__name__}")
    if not all(isinstance(v, (int, float)) for v in record.metrics.values()):
        raise TypeError("a metric that is not a number")
    return record


# The fields every reader relies on, and their types: a stored row with another is damaged (reported
# by its key and read as missing, so the cell is recomputed) rather than a traceback deep in a report.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "key": (str,), "task": (str,), "model": (str,), "seed": (int,), "group": (str,), "n_outputs": (int,),
    "metrics": (dict,), "not_applicable": (dict,), "sweep": (dict,), "info": (dict,), "determinism": (dict,),
    "params": (dict, type(None)), "predictions": (list, type(None)), "theory_predictions": (list, type(None)),
    "wall_time": (int, float), "device": (str,),
}
# A row's columns as every reader selects them: key, JSON, its token, and the JSON less the LAZY_FIELDS where SQLite's
# JSON functions find it valid, of the current record schema, with those fields of the types FIELD_TYPES wants (else
# NULL: the whole JSON is decoded, and a damaged one named, as before). CASE tries its branches in order, so no JSON
# function sees text that is not valid JSON (Python writes NaN, which SQLite's JSON is not).
LAZY_TYPES = {"params": "'object', 'null'", "predictions": "'array', 'null'", "theory_predictions": "'array', 'null'"}
ROW = ("key, record, id || ':' || quote(created), CASE WHEN NOT json_valid(record) THEN NULL"
       f" WHEN json_extract(record, '$.record_schema') IS {RECORD_SCHEMA} "
       + "".join(f" AND coalesce(json_type(record, '$.{f}'), 'null') IN ({t})" for f, t in LAZY_TYPES.items())
       + " THEN json_remove(record, " + ", ".join(f"'$.{f}'" for f in LAZY_FIELDS) + ") END")

# What reading a damaged row raises: bad JSON or a newer record schema (ValueError), a wrong shape (TypeError).
DAMAGE = (ValueError, TypeError, RecursionError)


def relabelled(record: CellRecord, **labels: Any) -> CellRecord:
    """`record.with_labels(**labels)` that, for a record read from a store, leaves undecoded what it has not decoded yet.

    `with_labels` copies with `dataclasses.replace`, which reads every field and so decoded the row's whole JSON,
    arrays included, a second time for each record reused under other names. Here (not in records/, whose source is
    part of the scoring code's hash: editing it rescores every stored record) the copy takes the fields already decoded
    and leaves the rest to decode from the same row's JSON when first read.
    """
    row = record.stored_row
    if row is None or not labels.keys() <= _FIELD_SET or all(getattr(record, k) == v for k, v in labels.items()):
        return record.with_labels(**labels)
    copy = object.__new__(CellRecord)
    for name in _FIELDS:
        try:
            value = object.__getattribute__(record, name)
        except AttributeError:  # a LAZY_FIELDS slot not decoded yet
            continue
        object.__setattr__(copy, name, value)
    for name, value in labels.items():
        object.__setattr__(copy, name, value)
    copy.__post_init__()
    # Known by its row and the names it was given (the report's digest cache keys records by this token): the same row
    # under the same names is the same content; a copy changed in any other way (`replace`) has no token.
    copy.stored_row = StoredRow(f"{row.token}|{json.dumps(labels, sort_keys=True, default=str)}", row.text)
    return copy
