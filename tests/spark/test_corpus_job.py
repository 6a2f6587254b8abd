"""The EMR corpus job equals ``swemill corpus`` (run_corpus) row for row, counts included.

The input has what makes dedup order-sensitive: exact and near duplicates in different
shards (so in different Spark partitions), a chain (A ~ B, B ~ C, A !~ C: the sequential
index keeps A and C), duplicates of an earlier run, and rows the filters drop.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from swemill.core.errors import CorpusError
from swemill.core.records import (
    Golden,
    Message,
    Outcome,
    PreferencePair,
    Task,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.core.tools import ToolCall
from swemill.corpus.assemble import CorpusConfig, assemble, row_text
from swemill.corpus.dedup import NearDupIndex
from swemill.corpus.split import SplitConfig
from swemill.corpus.stage import run_corpus
from swemill.spark.corpus_job import corpus_spark
from swemill.store import Store

from .conftest import rows_of

pytestmark = pytest.mark.slow
WORDS = ("stock", "count", "ledger", "restock", "quantity", "item", "balance", "total", "order",
         "invoice", "module", "function", "return", "value", "error", "test", "fix", "patch")
CHAIN_WORDS = 60
CHAIN = (("chain-a", []), ("chain-b", [20, 40]), ("chain-c", [10, 20, 40, 50]))
CONFIG = CorpusConfig(emit_wm=True, split=SplitConfig(holdout_fraction=0.3, seed=1))


def _task(i: int) -> Task:
    return Task(instance_id=f"t{i}", repo=f"acme/repo{i % 5}", base_commit="c0ffee",
                problem_statement=f"test_{i} fails", FAIL_TO_PASS=[f"t.py::test_{i}"],
                PASS_TO_PASS=[], test_cmd="pytest", strategy="procedural",
                license_tier="redistributable", env_recipe="e", snapshot="s",
                metadata={"file": f"m{i % 3}.py", "license_spdx": "MIT"})


def _messages(body: str, i: int, fixed: bool = True) -> list[Message]:
    call = ToolCall("edit", {"path": f"m{i}.py", "old_str": "a -= b",
                             "new_str": "a += b" if fixed else "a = b"}, id=f"e{i}")
    return [
        Message(role="system", content=[TextBlock(text="You fix bugs.")]),
        Message(role="user", content=[TextBlock(text=f"test_{i} fails")]),
        Message(role="assistant", content=[TextBlock(text=body), ToolUseBlock(call=call)]),
        Message(role="tool", content=[ToolResultBlock(call_id=f"e{i}", content="edited")]),
    ]


def _traj(tid: str, task: int, body: str, resolved: bool = True) -> Trajectory:
    return Trajectory(trajectory_id=tid, task_id=f"t{task}", source="rollout", policy="oracle",
                      messages=_messages(body, task), synthetic=True,
                      license_tier="redistributable",
                      outcome=Outcome(grade=float(resolved), resolved=resolved))


def _body(rng: random.Random, n: int = 120) -> list[str]:
    return [rng.choice(WORDS) + str(rng.randint(0, 40)) for _ in range(n)]


def _edit(words: list[str], at: list[int]) -> str:
    out = list(words)
    for i in at:
        out[i] = "changed" + str(i)
    return " ".join(out)


def _seed(store: Store) -> None:
    rng = random.Random(7)
    tasks = [_task(i) for i in range(12)]
    store.write_records("tasks", "r1", "00000", tasks)
    goldens = [Golden(instance_id=t.instance_id, bug_patch="-a += b\n+a -= b",
                      golden_patch="GOLDEN_SECRET_FIX_" + t.instance_id) for t in tasks]
    store.write_records("golden", "r1", "00000", goldens)
    bodies = [_body(rng) for _ in range(30)]
    earlier = [_traj(f"old{i}", i, " ".join(bodies[i])) for i in range(3)]
    store.write_records("trajectories", "r0", "00000", earlier)
    chain = _body(random.Random(99), CHAIN_WORDS)
    shards: list[list[Trajectory]] = [[], [], []]
    for i in range(30):
        shards[i % 3].append(_traj(f"a{i}", i % 12, " ".join(bodies[i])))
    shards[2].append(_traj("exact-of-a0", 4, " ".join(bodies[0])))  # also matches run r0
    shards[1].append(_traj("exact-of-a10", 5, " ".join(bodies[10])))
    shards[0].append(_traj("near-of-a11", 6, _edit(bodies[11], [50])))
    shards[2].append(_traj("near-of-a12", 7, _edit(bodies[12], [3, 90])))
    # A chain: B is near A and C, C is not near A; positions A < B < C across partitions.
    for k, (name, at) in enumerate(CHAIN):
        shards[k].append(_traj(name, 8, _edit(chain, at)))
    shards[1].append(_traj("unresolved", 9, "x y z", resolved=False))
    for k, rows in enumerate(shards):
        store.write_records("trajectories", "r1", f"{k:05d}", rows)
    pairs = [PreferencePair(pair_id=f"p{i}", prompt=_messages("p", i)[:2],
                            chosen=_messages(" ".join(bodies[i]), i)[2:],
                            rejected=_messages(" ".join(bodies[i]), i, fixed=False)[2:],
                            preference_source="execution", chosen_score=1.0,
                            rejected_score=0.0, task_id=f"t{i}", synthetic=True,
                            license_tier="redistributable") for i in range(6)]
    store.write_records("pairs", "r1", "00000", pairs[:4])
    store.write_records("pairs", "r1", "00001", pairs[3:])  # p3 twice: an exact duplicate


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store]:
    local = Store(str(tmp_path_factory.mktemp("corpus-local")))
    remote = Store(str(tmp_path_factory.mktemp("corpus-spark")))
    for store in (local, remote):
        _seed(store)
        run_corpus(store, "r0", CONFIG)  # the earlier run's index, made by the local path
    run_corpus(local, "r1", CONFIG)
    return local, remote


def test_spark_corpus_equals_local(spark: Any, stores: tuple[Store, Store]) -> None:
    local, remote = stores
    summary = corpus_spark(spark, remote, "r1", CONFIG)
    assert summary.partitions == 5  # three trajectory parts, two pair parts
    for stage in ("corpus/sft", "corpus/dpo", "corpus/holdout", "corpus/wm", "index/dedup"):
        want = rows_of(local, stage, "r1")
        assert want, stage
        assert rows_of(remote, stage, "r1") == want, stage
    counts = local.read_manifest("r1").counts
    assert remote.read_manifest("r1").counts == counts
    sft = counts["corpus.sft"]
    # a0..a2 repeat run r0 exactly; five rows are near copies (one is chain-b)
    assert sft["dropped_exact_duplicate"] == 3 and sft["dropped_near_duplicate"] == 5
    assert sft["dropped_unresolved"] == 1
    assert counts["corpus.dpo"]["dropped_exact_duplicate"] == 1
    kept = {r["trajectory_id"] for r in remote.read_records("corpus/sft", "r1")} | {
        r["trajectory_id"] for r in remote.read_records("corpus/holdout", "r1")
        if "trajectory_id" in r}
    assert {"chain-a", "chain-c"} <= kept and "chain-b" not in kept
    assert remote.exists("reports/run_id=r1/README.md")
    # every row carries its task's label, as the local stage gives it
    assert {r["difficulty"] for r in remote.read_records("corpus/sft", "r1")} - {None}


def test_a_curriculum_order_is_refused_in_one_line(spark: Any, stores: tuple[Store, Store]
                                                   ) -> None:
    with pytest.raises(CorpusError, match="curriculum"):
        corpus_spark(spark, stores[1], "r1", CorpusConfig(curriculum=True))


def test_the_chain_is_a_chain() -> None:
    """The premise of the chain rows: A ~ B and B ~ C above the threshold, A and C not."""
    words = _body(random.Random(99), CHAIN_WORDS)
    trajs = [_traj(name, 8, _edit(words, at)) for name, at in CHAIN]
    rows = assemble(trajs, config=CorpusConfig(dedup=False, split=SplitConfig(0.0))).sft
    texts = {r["trajectory_id"]: row_text(r["messages"]) for r in rows}
    index = NearDupIndex()
    sig = {k: index.signature(v) for k, v in texts.items()}
    t = index.config.jaccard_threshold

    def jac(a: str, b: str) -> float:
        return float(np.mean(sig[a] == sig[b]))

    assert jac("chain-a", "chain-b") >= t and jac("chain-b", "chain-c") >= t
    assert jac("chain-a", "chain-c") < t


def test_all_duplicates_is_one_clear_error(spark: Any, tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    _seed(store)
    run_corpus(store, "r1", CONFIG)
    store.write_records("trajectories", "r2", "00000",
                        store.read_records("trajectories", "r1", Trajectory)[:3])
    with pytest.raises(CorpusError, match="empty after filtering"):
        corpus_spark(spark, store, "r2", CONFIG)
    assert store.read_manifest("r2").counts["corpus.sft"]["dropped_exact_duplicate"] == 3


def test_no_inputs(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="has no trajectories, traces or pairs"):
        corpus_spark(spark, Store(str(tmp_path)), "nothing", CONFIG)


def test_an_ingested_run_with_segment_rows(spark: Any, tmp_path: Path) -> None:
    """Ingested sessions, one long enough to be stored as segment rows: the Spark job joins
    them per part and reads only ``trajectories/`` (``traces/`` holds states), as the local
    path does."""
    import dataclasses

    from swemill.traces import IngestOptions, ingest
    from swemill_testkit.fake_sessions import generate_session_file

    sessions = tmp_path / "sessions"
    generate_session_file(sessions / "long.jsonl", 60_000, compact_every=10)
    opts = dataclasses.replace(IngestOptions(), segment_bytes=4000)
    local, remote = Store(str(tmp_path / "local")), Store(str(tmp_path / "spark"))
    for store in (local, remote):
        ingest([sessions], store, run_id="r1", opts=opts, max_rows=4)
        assert len(store.read_records("trajectories", "r1", Trajectory)) > 5
        assert store.complete_shards("traces", "r1")
    run_corpus(local, "r1", CONFIG, allow_empty=True)
    corpus_spark(spark, remote, "r1", CONFIG, allow_empty=True)
    assert remote.read_manifest("r1").counts == local.read_manifest("r1").counts
    assert len(rows_of(local, "corpus/sft", "r1")) == 1  # the long session, joined
    for stage in ("corpus/sft", "corpus/dpo", "corpus/holdout", "corpus/wm"):
        assert rows_of(remote, stage, "r1") == rows_of(local, stage, "r1"), stage
