"""Result records and their append-only storage."""

from compbench.store.records import (
    KEY_SCHEMA,
    SCHEMA_VERSION,
    ResultStore,
    StoreError,
    StoreGoneError,
    StoreSchemaError,
    StoredRun,
    cell_key,
    claim_is_live,
    process_start_time,
)

__all__ = [
    "KEY_SCHEMA", "SCHEMA_VERSION", "ResultStore", "StoreError", "StoreGoneError", "StoreSchemaError", "StoredRun", "cell_key", "claim_is_live",
    "process_start_time",
]
