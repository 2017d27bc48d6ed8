"""Result records and their append-only storage."""

from compbench.store.records import SCHEMA_VERSION, ResultStore, StoreSchemaError, cell_key

__all__ = ["SCHEMA_VERSION", "ResultStore", "StoreSchemaError", "cell_key"]
