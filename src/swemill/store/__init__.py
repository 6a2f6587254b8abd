"""swemill.store: the one storage path for local disk and S3 (see ``layout`` for the keys)."""

from swemill.store.layout import new_run_id, shard_name
from swemill.store.parquet import schema_for_model
from swemill.store.store import Store

__all__ = ["Store", "new_run_id", "shard_name", "schema_for_model"]
