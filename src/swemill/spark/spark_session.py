"""A Spark session for the jobs (lazily imported; ``swemill[spark]`` provides PySpark)."""

from __future__ import annotations

import os
import sys
from typing import Any

from swemill.core.errors import MissingDependency

__all__ = ["spark_session"]


def spark_session(app: str, master: str | None = None) -> Any:
    """The active session, or a new one (``master`` e.g. ``local[2]``; None: spark-submit's)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise MissingDependency("the Spark jobs need PySpark: install 'swemill[spark]'") from exc
    # Python workers must run the interpreter that has swemill installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    builder = builder.config("spark.ui.enabled", "false").config(
        "spark.sql.shuffle.partitions", "4")
    return builder.getOrCreate()
