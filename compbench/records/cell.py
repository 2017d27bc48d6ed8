"""The one typed result record of a cell (one model, one task, one seed) and its serialised form.

Every module downstream of the runner (scoring, claims, the outcome, reports, `check`, the pytest
plugin) reads these fields, never a dict by string key. A record is stored as JSON with its schema
version; `CellRecord.from_dict` reads every version ever written (a store written by an older
compbench is migrated on read, never refused).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, NamedTuple

from compbench.controls import strip_controls
from compbench.errors import CompbenchError

RECORD_SCHEMA = 2  # 1: compbench 0.1.0's flat dicts (metrics as top-level keys); 2: this class


class Status(str, Enum):
    """What became of a cell: scored, failed, or skipped as invalid (`skip_invalid: true`)."""

    OK = "ok"
    ERROR = "error"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


_STATUS = {s.value: s for s in Status}
TASK_KINDS = ("classification", "regression", "multiclass")
# The fields no cache decision, judgement or leaderboard reads, only a report's writers and scoring: a record read from
# a store leaves them undecoded until first read (CellRecord.from_stored), as they are most of its bytes.
LAZY_FIELDS = ("params", "predictions", "theory_predictions", "theory_variance", "samples", "probe_predictions",
               "nearest_train")
_LAZY_SET = frozenset(LAZY_FIELDS)


class StoredRow(NamedTuple):
    """Where a record read from a store came from: the row's identity, and its JSON while fields are left to decode."""

    token: str  # the row's id and time of storing: rows are never rewritten, so one token is one content
    text: str | None  # the row's whole JSON (None once its LAZY_FIELDS are decoded)


@dataclass(frozen=True, slots=True)
class CellError:
    """Why a cell failed: the stage that raised, the message, the adapter-contract rules it broke."""

    message: str
    stage: str | None = None
    contract_breaks: tuple[str, ...] = ()
    traceback: str | None = None

    def __post_init__(self) -> None:
        # A model's exception text reaches terminals and reports: its control sequences go here, where
        # every error is made or read back from a store, so no place that shows one can obey them.
        object.__setattr__(self, "message", strip_controls(str(self.message)))
        if self.traceback is not None:
            object.__setattr__(self, "traceback", strip_controls(str(self.traceback)))

    def to_dict(self) -> dict[str, Any]:
        """The error as stored."""
        out: dict[str, Any] = {"message": self.message}
        if self.stage is not None:
            out["stage"] = self.stage
        if self.contract_breaks:
            out["contract_breaks"] = list(self.contract_breaks)
        if self.traceback is not None:
            out["traceback"] = self.traceback
        return out


@dataclass(slots=True)
class CellRecord:
    """One seed of one model on one task: identity, task shape, status, error, metrics, predictions."""

    key: str
    task: str
    model: str
    seed: int
    status: Status
    group: str = ""
    suite: str | None = None
    family: str = ""
    encoding: str = ""
    adapter: str = ""
    sweep: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    kind: str | None = None  # the task's kind (TASK_KINDS); None only for a record migrated without metrics
    n_outputs: int = 1
    n_classes: int | None = None
    params: dict[str, Any] | None = None  # the model's validated parameters (None in records of schema 1)
    error: CellError | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    not_applicable: dict[str, str] = field(default_factory=dict)  # metric → why its value says nothing here
    per_output: Any = None
    predictions: list[Any] | None = None
    theory_predictions: list[Any] | None = None
    # The across-seed variance of each cell's prediction its theory predicts (NTK-GP; None where the cell
    # is not held out, the whole field None where the model's theory predicts no spread).
    theory_variance: list[float | None] | None = None
    # The standard deviation over seeds of a held-out score its theory predicts, by metric (heldout_r2): `check`'s
    # noise floor for the cell.
    theory_sd: dict[str, float] = field(default_factory=dict)
    theory_kernel: str | None = None
    theory_objective: str | None = None
    theory_note: str | None = None
    n_train: int | None = None
    n_test: int | None = None
    wall_time: float = 0.0
    determinism: dict[str, Any] = field(default_factory=dict)
    # torch's intra-op threads in the process that computed it (a record stored before this field: read
    # from its determinism settings; None where torch was not imported). Not in the cache key: thread
    # counts change results only by float rounding.
    threads: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    version: str | None = None  # the compbench version that computed it (None: unknown, schema 1)
    code: str | None = None  # hash of the code that produced its predictions (None: unknown, schema 1)
    scoring: str | None = None  # hash of the code that scored them (scoring.score; another: rescored on read)
    samples: dict[str, Any] | None = None  # per-sample outputs, where scoring reads more than cell means
    # A task whose outputs are named factors: a linear probe's prediction per cell from the model's penultimate
    # features (None: it has none), and each held-out cell's nearest-training similarity under its own kernel (None
    # for a training cell; the whole field None without a kernel). Scoring reads them as it reads `predictions`.
    probe_predictions: list[Any] | None = None
    nearest_train: list[float | None] | None = None
    # Set by from_stored only, and dropped by any copy (dataclasses.replace): a record changed in memory is no longer
    # the row's content, so nothing may know it by the row's token.
    stored_row: StoredRow | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.group:
            self.group = self.model
        if not isinstance(self.status, Status):
            self.status = _STATUS.get(self.status) or Status(self.status)  # a lookup: Enum's call is slow

    def __getattr__(self, name: str) -> Any:
        # Reached only for a slot not set: a field from_stored left to decode on first read.
        if name in _LAZY_SET:
            row = object.__getattribute__(self, "stored_row")
            data = json.loads(row.text)
            for f in LAZY_FIELDS:
                object.__setattr__(self, f, data.get(f))
            object.__setattr__(self, "stored_row", row._replace(text=None))
            return object.__getattribute__(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_stored(cls, light: Mapping[str, Any], text: str, token: str) -> CellRecord:
        """A record of the current schema from its stored JSON `text` already decoded less its LAZY_FIELDS (`light`);
        those are decoded from `text` when first read."""
        record = cls.from_dict(light)
        for name in LAZY_FIELDS:
            object.__delattr__(record, name)
        record.stored_row = StoredRow(token, text)
        return record

    @property
    def ok(self) -> bool:
        """Whether the cell was scored."""
        return self.status is Status.OK

    @property
    def failed(self) -> bool:
        """Whether the cell failed (an error record)."""
        return self.status is Status.ERROR

    @property
    def skipped(self) -> bool:
        """Whether the cell was skipped as invalid."""
        return self.status is Status.SKIPPED

    @property
    def message(self) -> str:
        """The error message ('' for a record without an error)."""
        return self.error.message if self.error is not None else ""

    def metric(self, name: str) -> float | None:
        """A metric's value, or None when the record does not carry it."""
        return self.metrics.get(name)

    def finite_metric(self, name: str) -> float | None:
        """A metric's value when it is a finite number, else None."""
        v = self.metrics.get(name)
        return v if v is not None and math.isfinite(v) else None

    def with_labels(self, **labels: Any) -> CellRecord:
        """A copy under other names (suite, task, model, group, sweep): the key covers what determines a result, not names.

        The record itself when every label is already its own (a cached run reads 15 000 of them).
        """
        if all(getattr(self, k) == v for k, v in labels.items()):
            return self
        from dataclasses import replace

        return replace(self, **labels)

    def flat(self) -> dict[str, Any]:
        """One row for a table (records.csv): identity, status, error, every metric; arrays and params left out."""
        row: dict[str, Any] = {f: getattr(self, f) for f in _FLAT_FIELDS}
        row["status"] = self.status.value
        row["error"] = self.error.message if self.error else None
        row["error_stage"] = self.error.stage if self.error else None
        row.update(self.metrics)
        for metric, why in self.not_applicable.items():
            row[f"{metric}.n/a"] = why
        for k, v in (self.sweep or {}).items():
            row[f"sweep.{k}"] = v
        for k, v in (self.info or {}).items():
            row[f"info.{k}"] = v
        return row

    # -- serialised form ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The record as stored (JSON-ready, with its schema version)."""
        out: dict[str, Any] = {"record_schema": RECORD_SCHEMA}
        for f in _FIELDS:
            v = getattr(self, f)
            if f == "status":
                v = v.value
            elif f == "error":
                v = None if v is None else v.to_dict()
            out[f] = v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellRecord:
        """A record from its stored form, of any schema version (schema 1 is migrated)."""
        if isinstance(data, CellRecord):
            return data
        version = data.get("record_schema", 1)
        if version == RECORD_SCHEMA:
            kwargs = {f: data[f] for f in _FIELDS if f in data}
            kwargs["status"] = _STATUS[data["status"]]
            err = kwargs.get("error")
            if err is not None:
                kwargs["error"] = CellError(err["message"], err.get("stage"), tuple(err.get("contract_breaks") or ()),
                                            err.get("traceback"))
            metrics = kwargs.get("metrics") or {}
            if any(v is None for v in metrics.values()):  # JSON has no NaN in some writers' hands: null is NaN
                metrics = {k: math.nan if v is None else v for k, v in metrics.items()}
            kwargs["metrics"] = metrics
            if "threads" not in data:  # stored before the field: its determinism settings counted them
                kwargs["threads"] = (data.get("determinism") or {}).get("threads")
            return cls(**kwargs)
        if version == 1:
            return _from_v1(data)
        raise RecordSchemaError(f"record schema version {version!r} is newer than this compbench reads ({RECORD_SCHEMA}); "
                                "upgrade compbench")

    # -- read-only mapping view, for claims and writers written against schema-1 dicts ------------

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        """A field or metric by its schema-1 name (the record as the dicts of plugins' claims read it)."""
        if name in self.metrics:
            return self.metrics[name]
        if name in _FIELD_SET:
            value = getattr(self, name)
            if name == "status":
                return value.value
            if name == "error":
                return None if value is None else value.message
            return value if value is not None or name not in _OPTIONAL_V1 else default
        if name == "error_stage":
            return self.error.stage if self.error else default
        if name == "traceback":
            return self.error.traceback if self.error else default
        if name == "contract_breaks":
            return list(self.error.contract_breaks) if self.error and self.error.contract_breaks else default
        return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name, _MISSING) is not _MISSING

    def keys(self) -> Iterator[str]:
        """The names the mapping view has (schema-1 names)."""
        for f in _FIELDS:
            if f == "metrics":
                yield from self.metrics
            elif f in _OPTIONAL_V1 and getattr(self, f) is None:
                continue
            else:
                yield f


class RecordSchemaError(CompbenchError, ValueError):
    """A stored record of a schema this compbench cannot read (written by a newer compbench)."""


_MISSING = object()
_FIELDS = tuple(f.name for f in fields(CellRecord) if f.name != "stored_row")
_FIELD_SET = frozenset(_FIELDS)
_FLAT_FIELDS = ("key", "suite", "task", "family", "encoding", "model", "group", "adapter", "seed", "device", "kind",
                "n_outputs", "n_classes", "status", "n_train", "n_test", "wall_time", "theory_kernel", "theory_objective",
                "theory_note", "version", "code", "threads")
# Fields a schema-1 record had only in some records: absent there, None here.
_OPTIONAL_V1 = frozenset({"error", "per_output", "predictions", "theory_predictions", "theory_variance", "theory_kernel", "theory_objective",
                          "theory_note", "n_classes", "params", "version", "code", "kind", "suite", "n_train", "n_test",
                          "scoring", "samples", "threads", "probe_predictions", "nearest_train"})
# Schema-1 keys that were record fields, not metrics.
_V1_FIELDS = frozenset(_FIELDS) | {"schema_version", "error_stage", "traceback", "contract_breaks"}


def kind_from_metrics(metrics: Mapping[str, Any], n_classes: Any = None) -> str | None:
    """A schema-1 record's task kind, from the metrics it carries (schema 2 stores it)."""
    if "heldout_acc" in metrics or "train_acc" in metrics:
        return "multiclass" if n_classes else "classification"
    if "heldout_r2" in metrics or "train_mse" in metrics:
        return "regression"
    return None


def _from_v1(data: Mapping[str, Any]) -> CellRecord:
    """A schema-1 record (a flat dict: metrics as top-level keys, error fields beside them)."""
    metrics = {}
    for k, v in data.items():
        if k in _V1_FIELDS:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) and v is not None:
            continue
        metrics[k] = math.nan if v is None else float(v)
    error = None
    if data.get("error") is not None or data.get("status") == "error":
        error = CellError(str(data.get("error") or data.get("status")), data.get("error_stage"),
                          tuple(data.get("contract_breaks") or ()), data.get("traceback"))
    per_output = data.get("per_output")
    n_outputs = 1
    if isinstance(per_output, Mapping):
        n_outputs = max(1, len(per_output))
    elif isinstance(per_output, list):
        n_outputs = max(1, len(per_output))
    return CellRecord(
        key=data.get("key", ""), task=data["task"], model=data["model"], seed=int(data.get("seed", 0)),
        status=Status(data.get("status", "ok")),
        group=data.get("group") or data["model"], suite=data.get("suite"), family=data.get("family", ""),
        encoding=data.get("encoding", ""), adapter=data.get("adapter", ""), sweep=dict(data.get("sweep") or {}),
        device=data.get("device", "cpu"), kind=kind_from_metrics(metrics, data.get("n_classes")), n_outputs=n_outputs,
        n_classes=data.get("n_classes"), error=error, metrics=metrics, per_output=per_output,
        predictions=data.get("predictions"), theory_predictions=data.get("theory_predictions"),
        theory_kernel=data.get("theory_kernel"), theory_objective=data.get("theory_objective"),
        theory_note=data.get("theory_note"), n_train=data.get("n_train"), n_test=data.get("n_test"),
        wall_time=float(data.get("wall_time") or 0.0), determinism=dict(data.get("determinism") or {}),
        threads=(data.get("determinism") or {}).get("threads"),
        info=dict(data.get("info") or {}),
    )


def as_record(obj: CellRecord | Mapping[str, Any]) -> CellRecord:
    """A CellRecord from a record or its stored/dict form (any schema version)."""
    return obj if isinstance(obj, CellRecord) else CellRecord.from_dict(obj)


def as_records(objs: Any) -> list[CellRecord]:
    """CellRecords from records or their dict forms."""
    return [o if isinstance(o, CellRecord) else CellRecord.from_dict(o) for o in objs]
