"""A process that read store parts exits with its own status.

pyarrow's dataset reader starts native thread pools, and a process holding them aborted at
exit now and then (status -6, "terminate called without an active exception"): a command
that had printed its one error line and chosen exit 2 was reported as a crash. The store
reads every part on the calling thread, so no native thread is left to tear down.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_CHILD = """
import os, sys
from swemill.store import Store
from swemill.store.layout import shard_name

def native_threads():
    return len(os.listdir("/proc/self/task"))

store = Store.open(sys.argv[1])
rows = [{"k": i, "text": "x" * 200, "tags": ["a", "b"]} for i in range(2000)]
for s in range(3):
    store.write_records("tasks", "r1", shard_name(s, 3), rows)
before = native_threads()
for _ in range(3):
    assert len(store.read_records("tasks", "r1")) == 6000
print(native_threads() - before)
sys.exit(3)
"""


def _child(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, str(root)], capture_output=True,
                          text=True, timeout=120)


def test_reading_parts_starts_no_native_thread(tmp_path: Path) -> None:
    proc = _child(tmp_path / "store")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == "0"


def test_every_reader_process_exits_with_its_own_status(tmp_path: Path) -> None:
    # with pyarrow's threaded reader about one run in three of this child ended in SIGABRT
    codes = [_child(tmp_path / f"store{i}").returncode for i in range(8)]
    assert codes == [3] * 8
