"""Bad roots fail at open with one clear line, not deep inside a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from swemill.core.errors import StoreError
from swemill.store import Store
from swemill.store.testing import LocalS3


def test_root_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for root in (str(blocker), str(blocker / "sub"), f"file://{blocker}/sub"):
        with pytest.raises(StoreError, match="cannot write") as info:
            Store.open(root)
        assert "\n" not in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_root(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(StoreError, match="permission denied"):
        Store.open(str(ro / "out"))


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
