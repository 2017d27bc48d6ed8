"""The typed result record: a leaf package every module downstream of the runner imports."""

from compbench.records.cell import (
    RECORD_SCHEMA,
    TASK_KINDS,
    CellError,
    CellRecord,
    RecordSchemaError,
    Status,
    as_record,
    as_records,
    kind_from_metrics,
)

__all__ = [
    "RECORD_SCHEMA", "TASK_KINDS", "CellError", "CellRecord", "RecordSchemaError", "Status", "as_record", "as_records",
    "kind_from_metrics",
]
