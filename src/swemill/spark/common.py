"""Pieces both jobs share: how a store travels to executors, job arguments."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from swemill.store import Store

__all__ = ["StoreRef", "job_parser"]


@dataclass(frozen=True, slots=True)
class StoreRef:
    """A store root and its options: pickles small and reopens on every executor."""

    url: str
    storage_options: dict[str, Any]

    @classmethod
    def of(cls, store: Store) -> StoreRef:
        return cls(store.url, dict(store.storage_options))

    def open(self) -> Store:
        return Store(self.url, storage_options=self.storage_options)


def job_parser(description: str) -> argparse.ArgumentParser:
    """Arguments common to the jobs. Glue and EMR add their own (``--JOB_NAME`` ...): the
    jobs parse with ``parse_known_args`` and ignore them."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True, help="store root (a folder or s3:// URL)")
    p.add_argument("--run-id", default=None)
    p.add_argument("--partitions", type=int, default=None)
    p.add_argument("--master", default=None, help="Spark master (default: spark-submit's)")
    p.add_argument("--storage-options", type=json.loads, default=None,
                   help="fsspec options for the store as JSON (default: the environment)")
    return p
