"""Result records and their append-only storage."""

from compbench.store.records import (
    SCHEMA_VERSION,
    ResultStore,
    StoreError,
    StoreGoneError,
    StoreSchemaError,
    cell_key,
    claim_is_live,
    process_start_time,
)

__all__ = [
    "SCHEMA_VERSION", "ResultStore", "StoreError", "StoreGoneError", "StoreSchemaError", "cell_key", "claim_is_live",
    "process_start_time",
]
