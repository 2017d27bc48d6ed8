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
from compbench.records.grouping import BIG_SWEEP, big_groups, group_members, is_big

__all__ = [
    "RECORD_SCHEMA", "TASK_KINDS", "CellError", "CellRecord", "RecordSchemaError", "Status", "as_record", "as_records",
    "kind_from_metrics", "BIG_SWEEP", "big_groups", "group_members", "is_big",
]
