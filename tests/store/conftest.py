"""Store fixtures: every store test runs against local disk and a local S3 server."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.store import Store
from swemill_testkit.store import LocalS3, local_s3


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LocalS3]:
    with local_s3() as s3:
        yield s3


@pytest.fixture(params=["local", "file-url", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """A fresh, empty store root: a plain path, a file:// URL, or a prefix in the S3 bucket."""
    if request.param == "local":
        return Store.open(str(tmp_path / "root"))
    if request.param == "file-url":
        return Store.open(f"file://{tmp_path}/root")
    s3: LocalS3 = request.getfixturevalue("s3_server")
    return Store.open(s3.root(secrets.token_hex(4)), storage_options=s3.storage_options)
