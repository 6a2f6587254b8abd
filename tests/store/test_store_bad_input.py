"""Bad roots fail at open with one clear line, not deep inside a run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swemill.core.errors import StoreError
from swemill.store import Store
from swemill_testkit.store import LocalS3


def test_root_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for root in (str(blocker), str(blocker / "sub"), f"file://{blocker}/sub"):
        with pytest.raises(StoreError, match="cannot write") as info:
            Store.open(root)
        assert "\n" not in str(info.value)


_OPEN_RO = """
import sys
from swemill.core.errors import StoreError
from swemill.store import Store
try:
    Store.open(sys.argv[1])
except StoreError as exc:
    print(exc)
    sys.exit(2)
"""


def test_permission_denied_root(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    tmp_path.chmod(0o755)
    cmd = [sys.executable, "-c", _OPEN_RO, str(ro / "out")]
    if os.geteuid() == 0:  # root ignores modes: ask as an ordinary user instead
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv to drop privileges")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "permission denied" in proc.stdout
    assert proc.stdout.count("\n") == 1


def test_read_only_file_system() -> None:
    # /proc refuses new files even for root: the same error path as a read-only mount.
    with pytest.raises(StoreError, match="cannot write"):
        Store.open("/proc/swemill-out")


def test_unreachable_s3_endpoint_fails_fast() -> None:
    opts = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    start = time.monotonic()
    with pytest.raises(StoreError, match="cannot write s3://bucket/out") as info:
        Store.open("s3://bucket/out", storage_options=opts)
    assert time.monotonic() - start < 30
    assert "\n" not in str(info.value)


def test_missing_bucket(s3_server: LocalS3) -> None:
    with pytest.raises(StoreError, match="cannot write s3://no-such-bucket-here/x"):
        Store.open("s3://no-such-bucket-here/x", storage_options=s3_server.storage_options)


def test_endpoint_from_environment(s3_server: LocalS3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    store = Store.open(s3_server.root("from-env"))
    store.write_json("a.json", {"ok": True})
    assert store.read_json("a.json") == {"ok": True}


def test_empty_root() -> None:
    with pytest.raises(StoreError, match="empty"):
        Store("")


@pytest.mark.parametrize("root", ["ftp://example.invalid/x", "memory://x", "http://h/x",
                                  "gcs://bucket/x", "simplecache::s3://bucket/x"])
def test_unsupported_schemes_are_refused_before_any_io(root: str) -> None:
    # ftp:// used to resolve the host (a traceback); memory:// "worked" and lost the run
    with pytest.raises(StoreError, match="unsupported store root") as info:
        Store(root)
    assert "\n" not in str(info.value)


def test_supported_roots_still_open(tmp_path: Path) -> None:
    assert Store(str(tmp_path / "a")).is_local
    assert Store(f"file://{tmp_path}/b").is_local
    assert not Store("s3://bucket/prefix").is_local


@pytest.mark.slow  # real processes: ~4 s of imports each on a busy machine
@pytest.mark.parametrize("args", [
    ["traces", "ingest", "{src}", "--out", "ftp://example.invalid/x"],
    ["traces", "ingest", "{src}", "--out", "memory://x"],
    ["build", "--out", "memory://x"],
    ["corpus", "--run", "r1", "--out", "ftp://example.invalid/x"],
])
def test_cli_refuses_unsupported_roots_with_one_line(tmp_path: Path, args: list[str]) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text('{"type": "user"}\n')
    argv = [a.replace("{src}", str(src)) for a in args]
    proc = subprocess.run([sys.executable, "-m", "swemill", *argv], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "unsupported store root" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]  # nothing written
