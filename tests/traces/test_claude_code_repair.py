"""Claude Code logs as other tools write them: lost parents, stray lines of another session,
duplicate uuids, the older untyped format, encrypted reasoning, images, unknown models.

The lines are written by hand here (not with ``SessionWriter``), the way a third-party
exporter or a test suite of another project writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swemill.core.records import Message, ThinkingBlock, Trajectory
from swemill.policies.prices import Price
from swemill.traces.claude_code import IngestOptions, ingest_session_file
from swemill.traces.states import IngestCounts


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _run(path: Path, opts: IngestOptions | None = None) -> tuple[IngestCounts, list[Trajectory]]:
    counts = IngestCounts()
    items = list(ingest_session_file(path, counts, set(), opts))
    return counts, [i for i in items if isinstance(i, Trajectory)]


def _user(uuid: str, parent: str | None, content: Any, sid: str = "A") -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": sid,
            "message": {"role": "user", "content": content}}


def _asst(uuid: str, parent: str | None, mid: str, content: list[dict[str, Any]],
          sid: str = "A", model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": sid,
            "message": {"id": mid, "role": "assistant", "model": model, "content": content,
                        "usage": {"input_tokens": 10, "output_tokens": 5}}}


def _call(cid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": "ls"}}


def _result(cid: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": cid, "content": "a.py"}]


def _roles(traj: Trajectory) -> list[str]:
    return [m.role for m in traj.messages]


def _linear_session() -> list[dict[str, Any]]:
    """Three tool rounds and a final answer: 6 user-side records (1 prompt, 3 results, 2
    follow-ups), written as one linear chain."""
    recs = [_user("u1", None, "list the files")]
    prev = "u1"
    for k in range(3):
        recs.append(_asst(f"a{k}", prev, f"m{k}", [_call(f"c{k}")]))
        recs.append(_user(f"r{k}", f"a{k}", _result(f"c{k}")))
        prev = f"r{k}"
    recs.append(_asst("a3", prev, "m3", [{"type": "text", "text": "ok"}]))
    recs.append(_user("u2", "a3", "thanks, now the tests"))
    recs.append(_user("u3", "u2", "and the docs"))
    recs.append(_asst("a4", "u3", "m4", [{"type": "text", "text": "done"}]))
    return recs


def test_a_lost_parent_is_reattached_and_a_stray_session_stays_apart(tmp_path: Path) -> None:
    recs = _linear_session()
    recs[4]["parentUuid"] = "never-written"  # the line it pointed at was lost
    # a stray line of another session, written last: it must not become the main chain
    recs.append(_user("x1", None, "unrelated prompt", sid="B"))
    recs.append(_asst("x2", "x1", "mx", [{"type": "text", "text": "hi"}], sid="B"))
    counts, trajs = _run(_write(tmp_path / "s.jsonl", recs))
    assert counts.reattached == 1 and counts.sessions == 2
    assert sorted(t.trajectory_id for t in trajs) == ["claude_code:A", "claude_code:B"]
    main = next(t for t in trajs if t.trajectory_id == "claude_code:A")
    assert _roles(main).count("user") == 3 and _roles(main).count("tool") == 3
    assert len(main.messages) == 11


def test_duplicate_uuid_keeps_the_well_formed_copy(tmp_path: Path) -> None:
    recs = _linear_session()
    broken = dict(recs[1], message={"id": "m0", "role": "assistant"})  # no content
    recs.insert(1, broken)  # the malformed copy comes first
    counts, trajs = _run(_write(tmp_path / "d.jsonl", recs))
    assert counts.dropped.get("duplicate_uuid") == 1
    (traj,) = trajs
    assert traj.messages[1].content and traj.messages[1].role == "assistant"


def test_older_untyped_lines_with_cost_are_read(tmp_path: Path) -> None:
    recs = _linear_session()
    for r in recs:
        del r["type"]
        if r["message"]["role"] == "assistant":
            r["costUSD"] = 0.002
    counts, trajs = _run(_write(tmp_path / "old.jsonl", recs))
    (traj,) = trajs
    assert _roles(traj).count("assistant") == 5
    assert abs(counts.cost_usd - 5 * 0.002) < 1e-9


def test_encrypted_reasoning_and_images_are_kept_typed_and_counted(tmp_path: Path) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0"}}
    recs = [_user("u1", None, [{"type": "text", "text": "what is this?"}, image]),
            _asst("a1", "u1", "m1", [{"type": "redacted_thinking", "data": "Enc+0paque"},
                                     {"type": "text", "text": "a chart"}])]
    counts, trajs = _run(_write(tmp_path / "r.jsonl", recs))
    assert counts.redacted_thinking == 1 and counts.images == 1
    (traj,) = trajs
    user, asst = traj.messages
    assert [getattr(b, "text", None) for b in user.content] == ["what is this?",
                                                                 "[image: image/png]"]
    block = asst.content[0]
    assert isinstance(block, ThinkingBlock) and block.redacted and block.signature == "Enc+0paque"
    assert Message.model_validate(asst.model_dump()).content[0] == block  # round-trips


def test_unknown_models_are_counted_unpriced_or_priced_from_the_users_table(
        tmp_path: Path) -> None:
    recs = [_user("u1", None, "hi"),
            _asst("a1", "u1", "m1", [{"type": "text", "text": "hello"}], model="acme-coder-7b")]
    path = _write(tmp_path / "u.jsonl", recs)
    counts, _ = _run(path)
    assert counts.unpriced == {"acme-coder-7b": 1} and counts.cost_usd == 0
    counts, _ = _run(path, IngestOptions(prices={"acme-coder": Price(input=1e6, output=0)}))
    assert counts.unpriced == {} and counts.cost_usd == 10.0  # 10 input tokens at $1 each


def test_cli_warns_about_unpriced_models_and_takes_a_price_table(tmp_path: Path) -> None:
    import subprocess
    import sys

    recs = [_user("u1", None, "hi"),
            _asst("a1", "u1", "m1", [{"type": "text", "text": "hello"}], model="acme-coder-7b")]
    path = _write(tmp_path / "u.jsonl", recs)
    run = [sys.executable, "-m", "swemill", "traces", "ingest", str(path), "--json"]
    plain = subprocess.run([*run, "--out", str(tmp_path / "a")], capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert "no price for acme-coder-7b (1 turns)" in plain.stderr
    assert json.loads(plain.stdout)["counts"]["unpriced"] == {"acme-coder-7b": 1}
    (tmp_path / "prices.json").write_text('{"acme-coder": "1000000,0"}')
    priced = subprocess.run([*run, "--out", str(tmp_path / "b"), "--prices",
                             str(tmp_path / "prices.json")], capture_output=True, text=True)
    assert priced.returncode == 0 and "no price" not in priced.stderr
    assert json.loads(priced.stdout)["counts"]["cost_usd"] == 10.0
    (tmp_path / "bad.json").write_text("[1, 2]")
    bad = subprocess.run([*run, "--out", str(tmp_path / "c"), "--prices",
                          str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--prices" in bad.stdout + bad.stderr


SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "claude_code"


def test_every_line_of_the_shared_fixtures_is_read_skipped_or_quarantined() -> None:
    """Session logs from another project's test data: each line is counted as a record of
    some type (read into messages, or skipped by type) or quarantined; user and assistant
    records all reach the trajectory."""
    files = sorted(SHARED.glob("*.jsonl"))
    if not files:
        import pytest

        pytest.skip(f"no shared fixtures at {SHARED}")
    for path in files:
        counts, trajs = _run(path)
        assert sum(counts.record_types.values()) + counts.quarantined == counts.lines, path
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        responses = {r["message"].get("id") or r["uuid"] for r in records
                     if r.get("type") == "assistant"}
        (traj,) = trajs  # one linear session each
        assert sum(m.role == "assistant" for m in traj.messages) == len(responses) > 0, path


def test_no_absolute_local_path_reaches_the_store(tmp_path: Path) -> None:
    """Rows and the manifest name files relative to the input, with home folders as ``~``."""
    from swemill.store import Store
    from swemill.traces.ingest import ingest

    project = tmp_path / "projects" / "-home-alice-shop"
    project.mkdir(parents=True)
    _write(project / "s1.jsonl", _linear_session())
    (project / "junk.jsonl").write_text("not json\n")
    out = tmp_path / "out"
    result = ingest([tmp_path / "projects"], Store.open(str(out)))
    assert result.counts.trajectories == 1 and result.counts.quarantined == 1
    import pyarrow.parquet as pq

    def text(p: Path) -> str:  # Parquet pages are compressed: read the values back
        return json.dumps(pq.read_table(p).to_pylist(), default=str) \
            if p.suffix == ".parquet" else p.read_text(errors="replace")

    found = [p for p in out.rglob("*") if p.is_file()
             and (str(tmp_path) in text(p) or "alice" in text(p))]
    assert found == []
    trajs = Store.open(str(out)).read_records("trajectories", result.run_id, Trajectory)
    assert trajs[0].metadata["source_file"] == "projects/~-shop/s1.jsonl"
