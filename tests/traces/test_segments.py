"""A long session stored as segment rows reads back exactly as the same session stored whole.

One hand-written session with everything that crosses a segment boundary: compactions, a
rewind branch, an inline sidechain, two models, tool errors, and a response whose last line
comes after its tool result. It is ingested twice, with the default segment size (one row
per trajectory) and with a tiny one (many rows, parts cut between row groups), and every
reader of the trajectories table (states with history, the corpus, replay) must see the same.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from swemill.core.errors import StoreError
from swemill.core.records import Message, TextBlock, Trajectory
from swemill.core.segments import SEGMENT, SEGMENTS, join_segments
from swemill.store import Store
from swemill.traces import IngestOptions, ingest, load_states, load_trajectories
from swemill_testkit.fake_sessions import SessionWriter, text, thinking, tool_use

SONNET, OPUS = "claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"


def _turn(w: SessionWriter, n: int, late_block: bool = False) -> None:
    call = f"toolu_{n:03d}"
    msg_id = w.assistant([thinking(f"think {n} " * 20), text(f"step {n} " * 30),
                          tool_use(call, "Bash", {"command": f"pytest -k t{n}"})],
                         {"input_tokens": 10 + n, "output_tokens": 50, "cache_read": 900},
                         model=OPUS if n % 4 == 0 else SONNET)
    first_line = next(r for r in w.lines if r.get("message", {}).get("id") == msg_id)
    w.tool_result(call, f"line {n}\n" * 40, is_error=n % 7 == 3)
    if late_block:  # one more line of the same response, written after its tool result
        rec = dict(first_line, uuid=f"late-{n}", parentUuid=w.head)
        rec["message"] = dict(first_line["message"], content=[text(f"late note {n}")])
        w.lines.append(rec)
        w.head = rec["uuid"]


def _session(path: Path) -> Path:
    w = SessionWriter("seg", cwd="/home/dev/proj")
    w.user("Fix the parser; the tests under tests/ fail.")
    fork = None
    for n in range(45):
        _turn(w, n, late_block=n == 12)
        if n in (10, 33):
            w.compact(f"Summary of the work up to step {n}.")
        if n == 25:
            fork = w.head
            side = SessionWriter("seg", cwd="/home/dev/proj", sidechain=True)
            side.user("Look for the config loader.")
            for k in range(3):
                _turn(side, 100 + k)
            w.lines.extend(side.lines)
            for k in range(3):  # a rewind: tried from step 25, then abandoned
                _turn(w, 200 + k)
            w.head = fork
    w.assistant([text("All tests pass now.")], {"input_tokens": 10, "output_tokens": 20})
    return w.write(path)


def _ingest(session: Path, root: Path, segment_bytes: int, **kw: Any) -> tuple[Store, str]:
    store = Store.open(str(root))
    opts = dataclasses.replace(IngestOptions(), segment_bytes=segment_bytes)
    result = ingest([session], store, run_id="r1", opts=opts, **kw)
    assert result.error is None
    return store, result.run_id


def _same(t: Trajectory) -> dict[str, Any]:
    return t.model_dump(exclude={"created_at"})


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store]:
    tmp = tmp_path_factory.mktemp("segments")
    session = _session(tmp / "projects" / "-home-dev-proj" / "seg.jsonl")
    whole, _ = _ingest(session, tmp / "whole", IngestOptions().segment_bytes)
    pieces, _ = _ingest(session, tmp / "pieces", 3000, max_rows=5, group_bytes=5000)
    return whole, pieces


def test_segment_rows_join_into_the_whole_trajectories(stores: tuple[Store, Store]) -> None:
    whole, pieces = stores
    raw_whole = whole.read_records("trajectories", "r1", Trajectory)
    raw = pieces.read_records("trajectories", "r1", Trajectory)
    assert not any(SEGMENT in t.metadata for t in raw_whole)  # small enough: ordinary rows
    assert {t.metadata["branch"] for t in raw_whole} == {"main", "branch", "sidechain"}
    main = [t for t in raw if t.trajectory_id == "claude_code:seg"]
    assert len(main) > 10 and [t.metadata[SEGMENT] for t in main] == list(range(len(main)))
    assert main[-1].metadata[SEGMENTS] == len(main)
    joined = load_trajectories(pieces, "r1")
    assert [_same(t) for t in joined] == [_same(t) for t in load_trajectories(whole, "r1")]
    assert joined[0].metadata["compactions"] and joined[0].usage.cost_usd > 0
    # each part holds whole trajectories, so a per-part reader (the Spark corpus job) can join
    shards = pieces.complete_shards("trajectories", "r1")
    assert len(shards) > 1
    per_part = [t for s in shards
                for t in join_segments(pieces.read_shard("trajectories", "r1", s, Trajectory))]
    assert [_same(t) for t in per_part] == [_same(t) for t in joined]


def test_states_and_their_history_are_the_same(stores: tuple[Store, Store]) -> None:
    whole, pieces = stores
    a, b = load_states(whole, "r1"), load_states(pieces, "r1")
    assert a == b and len(a) == 45 + 3 + 3 + 1
    late = next(s for s in a if s.turn == 12 and s.branch == "main")
    assert late.response.content[-1] == TextBlock(text="late note 12")
    assert len(pieces.complete_shards("traces", "r1")) > 1


def test_the_corpus_is_the_same(stores: tuple[Store, Store]) -> None:
    from swemill.corpus.stage import read_inputs, run_corpus

    assert [_same(t) for t in read_inputs(stores[1], "r1")["trajectories"]] == \
        [_same(t) for t in read_inputs(stores[0], "r1")["trajectories"]]
    summaries = [run_corpus(s, "r1", allow_empty=True) for s in stores]
    assert summaries[0].rows == summaries[1].rows and summaries[0].counts == summaries[1].counts
    assert summaries[0].rows["sft"] + summaries[0].rows["sft_holdout"] == 3  # main, branch, side
    rows = [sorted((r for r in s.read_records("corpus/sft", "r1")), key=str) for s in stores]
    assert rows[0] == rows[1]


def test_damaged_segments_are_one_clear_error() -> None:
    def seg(k: int, last: bool = False) -> Trajectory:
        meta: dict[str, Any] = {SEGMENT: k} | ({SEGMENTS: k + 1} if last else {})
        return Trajectory(trajectory_id="t", source="claude_code", policy="", metadata=meta,
                          messages=[Message(role="user", content=[TextBlock(text=str(k))])])

    joined = join_segments([seg(0), seg(1), seg(2, last=True)])
    assert [m.text for m in joined[0].messages] == ["0", "1", "2"] and not joined[0].metadata
    with pytest.raises(StoreError, match="segment 2 where segment 1 was expected"):
        join_segments([seg(0), seg(2, last=True)])
    with pytest.raises(StoreError, match="last segment is missing"):
        join_segments([seg(0), seg(1)])
