"""Exact and near-duplicate removal, and the index that carries over between runs."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from swemill.core.errors import ConfigError, StoreError
from swemill.corpus.dedup import (
    ExactDedup,
    MinHashConfig,
    NearDupIndex,
    normalize_text,
    shingles,
    text_hash,
)
from swemill.store import Store
from swemill_testkit.store import LocalS3, local_s3

SRC = Path(__file__).resolve().parents[2] / "src" / "swemill"


def _code_files() -> list[str]:
    texts = {p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))}
    return sorted(t for t in texts if len(t) > 3000)[:40]


def _edit(text: str, seed: int) -> str:
    """A light edit: one line changed, one line dropped (a near duplicate, not an exact one)."""
    rng = random.Random(seed)
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    lines[i] = lines[i] + "  # tweaked"
    del lines[rng.randrange(len(lines))]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def s3_server() -> Iterator[LocalS3]:
    with local_s3() as s3:
        yield s3


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return Store.open(str(tmp_path / "root"))
    s3: LocalS3 = request.getfixturevalue("s3_server")
    return Store.open(s3.root(secrets.token_hex(4)), storage_options=s3.storage_options)


def test_normalised_exact_hash() -> None:
    assert normalize_text("  Foo\t\nBAR  ") == "foo bar"
    assert normalize_text("a-b_c!", ignore_non_character=True) == "abc"
    assert text_hash("def f():\n  pass") == text_hash("DEF  f():  pass ")
    assert text_hash("a") != text_hash("b")
    dedup = ExactDedup()
    assert dedup.check_and_add("r1", "Hello   world") is None
    assert dedup.check_and_add("r2", "hello world") == "r1"
    assert dedup.check_and_add("r3", "hello there") is None


def test_shingles() -> None:
    cfg = MinHashConfig(window_size=2)
    assert shingles("a = b", cfg) == {b"a =", b"= b"}
    assert shingles("x", cfg) == {b"x"}
    assert shingles("", cfg) == set()
    assert shingles("A b", MinHashConfig(tokenization="space", window_size=5)) == {b"a b"}
    assert shingles("abc", MinHashConfig(tokenization="character", window_size=2)) == {b"ab", b"bc"}


def test_near_duplicates_found_and_distinct_files_kept() -> None:
    files = _code_files()
    assert len(files) >= 10
    index = NearDupIndex("r1")
    assert [index.check_and_add(f"f{i}", t) for i, t in enumerate(files)] == [None] * len(files)
    matches = [index.check_and_add(f"e{i}", _edit(t, i)) for i, t in enumerate(files)]
    assert all(m is not None and m.kind == "near" for m in matches), matches
    assert [m.row_id for m in matches if m] == [f"f{i}" for i in range(len(files))]
    assert index.counts == {
        "in": 2 * len(files),
        "out": len(files),
        "dropped_near_duplicate": len(files),
    }


@pytest.mark.slow
def test_second_run_drops_first_runs_rows(store: Store) -> None:
    files = _code_files()[:12]
    first = NearDupIndex.load(store, "run-1")
    for i, text in enumerate(files):
        assert first.check_and_add(f"row{i}", text) is None
    assert first.save(store) == len(files)

    second = NearDupIndex.load(store, "run-2")
    assert len(second) == len(files)
    exact = second.check_and_add("again", "  " + files[0].upper())
    near = second.check_and_add("edited", _edit(files[1], 7))
    fresh = second.check_and_add("new", "a brand new row about something else entirely, " * 5)
    assert exact is not None and (exact.kind, exact.run_id, exact.row_id) == (
        "exact",
        "run-1",
        "row0",
    )
    assert near is not None and (near.kind, near.run_id, near.row_id) == ("near", "run-1", "row1")
    assert near.jaccard >= 0.7 and fresh is None
    assert second.counts["dropped_exact_duplicate"] == 1
    assert second.counts["dropped_near_duplicate"] == 1
    second.save(store)
    # A resumed run-2 sees run-1's rows but not its own saved ones.
    assert len(NearDupIndex.load(store, "run-2")) == len(files)
    assert len(NearDupIndex.load(store, "run-3")) == len(files) + 1


def test_index_with_other_settings_is_refused(store: Store) -> None:
    index = NearDupIndex.load(store, "a")
    index.check_and_add("x", "some text that is long enough to shingle nicely here")
    index.save(store)
    with pytest.raises(StoreError, match="other MinHash settings"):
        NearDupIndex.load(store, "b", MinHashConfig(num_permutations=64))


def test_unfinished_index_shard_is_skipped(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path))
    store.put_bytes("index/dedup/run_id=crashed/part-00000.parquet", b"partial")
    assert len(NearDupIndex.load(store, "next")) == 0


def test_bad_settings_and_unsaved_index(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        MinHashConfig(jaccard_threshold=0.0)
    with pytest.raises(ConfigError):
        MinHashConfig(window_size=0)
    with pytest.raises(StoreError, match="no run id"):
        NearDupIndex().save(Store.open(str(tmp_path)))


def test_texts_without_shingles_only_match_exactly() -> None:
    index = NearDupIndex("r")
    assert index.check_and_add("a", "") is None
    assert index.check_and_add("b", "   ") is not None  # normalises to the same empty text
    assert index.check_and_add("c", "x") is None
