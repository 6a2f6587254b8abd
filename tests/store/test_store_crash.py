"""A writer killed with SIGKILL never leaves a half-written object under its final name."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from swemill.store import Store, layout

_WRITER = """
import json, sys
from swemill.store import Store
store = Store(sys.argv[1], storage_options=json.loads(sys.argv[2]))
rows = [{"i": i, "text": "x" * 2000} for i in range(2000)]
print("ready", flush=True)
for k in range(10_000):
    store.write_records("corpus/sft", "crash", f"{k:05d}", rows)
"""


@pytest.mark.slow
def test_sigkill_mid_write_leaves_only_whole_parts(store: Store) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, store.url, json.dumps(store.storage_options)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while len(store.complete_shards("corpus/sft", "crash")) < 3:
            assert time.monotonic() < deadline, "the writer made no progress"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    finished = store.complete_shards("corpus/sft", "crash")
    rows = store.read_records("corpus/sft", "crash")
    assert len(rows) == 2000 * len(finished)
    # Every part under its final name parses, finished or not: nothing half-written.
    prefix = layout.run_prefix("corpus/sft", "crash")
    for name in store.list_keys(prefix):
        if name.startswith("part-"):
            table = pq.read_table(io.BytesIO(store.get_bytes(f"{prefix}/{name}")))
            assert table.num_rows == 2000, name
