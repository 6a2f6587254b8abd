"""One local[2] Spark session for the whole test directory (JVM start-up is slow)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swemill.store import Store

pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from swemill.spark.spark_session import spark_session

    session = spark_session("swemill-tests", "local[2]")
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# When a record was made differs between any two runs; everything else must not.
WALL_CLOCK = frozenset({"created_at"})


def rows_of(store: Store, stage: str, run_id: str) -> list[str]:
    """Every row of a stage as canonical JSON, sorted: equality "order aside"."""
    if not store.complete_shards(stage, run_id):
        return []
    rows = store.read_records(stage, run_id)
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in WALL_CLOCK}, sort_keys=True,
                   default=str)
        for r in rows
    )
