"""The same build into ``s3://bucket/prefix`` on a local S3 server gives the same rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swemill.store import Store
from swemill_testkit.store import LocalS3, local_s3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with local_s3() as server:
        yield server


def test_s3_root_gives_the_same_row_counts(sample_build, cli, s3: LocalS3) -> None:
    root = s3.root("datasets/gen0")
    out = cli.build_json("--out", root, *cli.BUILD_ARGS, cache=sample_build.cache, env=s3.env())
    assert out["status"] == "complete"
    assert out["rows"] == sample_build.out["rows"]
    assert out["locations"]["sft"].startswith(f"s3://{s3.bucket}/datasets/gen0/corpus/sft/")
    store = Store.open(root, storage_options=s3.storage_options)
    run = out["run_id"]
    assert store.read_manifest(run).status == "complete"
    assert len(store.read_records("corpus/sft", run)) == out["rows"]["sft_train"]
    assert len(store.read_records("corpus/dpo", run)) == out["rows"]["dpo_train"]
    assert store.exists(f"reports/run_id={run}/README.md")
    assert store.exists(f"reports/run_id={run}/index.html")
