"""``swemill traces ingest`` end to end: a real process, a real store, Parquet read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swemill.cli.main import app
from swemill.store import Store
from swemill.traces.fake_sessions import SessionWriter, text, tool_use
from swemill.traces.load import load_quarantine, load_states, load_trajectories


def _swemill(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=120)


def _projects(root: Path) -> Path:
    project = root / "projects" / "-home-dev-proj"
    w = SessionWriter("sess-1", "/home/dev/proj")
    w.user("run the tests")
    w.assistant([text("Running."), tool_use("t1", "Bash", {"command": "pytest  -q"})],
                {"input_tokens": 10, "output_tokens": 20, "cache_read": 300})
    w.tool_result("t1", "1 failed", is_error=True)
    w.assistant([text("One test fails.")], {"input_tokens": 12, "output_tokens": 8})
    w.write(project / "sess-1.jsonl")
    sub = SessionWriter("sess-1", "/home/dev/proj", sidechain=True, agent_id="ab12")
    sub.user("look around")
    sub.assistant([tool_use("g1", "Glob", {"pattern": "**/*.py"})], {"output_tokens": 4})
    sub.write(project / "sess-1" / "subagents" / "agent-ab12.jsonl")
    (project / "sess-1.jsonl").open("a").write("{broken\n")
    (project / "notes.md").write_text("not a session")
    return root / "projects"


@pytest.mark.slow  # a real process: ~4 s of imports on a busy machine
def test_ingest_writes_states_trajectories_quarantine_and_manifest(tmp_path: Path) -> None:
    out = tmp_path / "store"
    proc = _swemill("traces", "ingest", str(_projects(tmp_path)), "--out", str(out),
                    "--run-id", "r1", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    c = report["counts"]
    assert (c["files"], c["sessions"], c["subagent_sessions"]) == (3, 1, 1)
    assert (c["assistant_turns"], c["tool_calls"], c["tool_errors"]) == (3, 2, 1)
    assert (c["input_tokens"], c["output_tokens"], c["cache_read_tokens"]) == (22, 32, 300)
    assert (c["quarantined"], c["quarantined_files"]) == (1, 1)

    store = Store.open(str(out))
    states = {s.state_id: s for s in load_states(store, "r1")}
    assert set(states) == {"sess-1::0000", "sess-1::0001", "sess-1/agent-ab12::0000"}
    second = states["sess-1::0001"]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[2].content[0].is_error is True  # type: ignore[union-attr]
    assert states["sess-1::0000"].actions[0].canonical().args == {"command": "pytest -q"}
    assert states["sess-1/agent-ab12::0000"].parent_trajectory_id == "claude_code:sess-1"
    trajs = {t.trajectory_id for t in load_trajectories(store, "r1")}
    assert trajs == {"claude_code:sess-1", "claude_code:sess-1/agent-ab12"}
    q = load_quarantine(store, "r1")
    assert sorted((Path(x.file).name, x.line_no) for x in q) == [
        ("notes.md", 0), ("sess-1.jsonl", 6)]
    manifest = store.read_manifest("r1")
    assert manifest.status == "complete"
    assert manifest.counts["traces"]["assistant_turns"] == 3
    # States at rest do not carry the history (it lives once, in the trajectory).
    assert "messages" not in store.read_tables("traces", "r1")[0][1].column_names


def test_human_output_lists_the_counts(tmp_path: Path) -> None:
    out = tmp_path / "store"
    result = CliRunner().invoke(app, ["traces", "ingest", str(_projects(tmp_path)),
                                      "--out", str(out), "--run-id", "h1"])
    assert result.exit_code == 0, result.output
    for word in ("assistant_turns", "quarantined", "tool_calls", "input_tokens"):
        assert word in result.output
    assert Store.open(str(out)).read_manifest("h1").status == "complete"


@pytest.mark.slow
def test_a_bad_path_is_one_line_and_exit_2_with_nothing_written(tmp_path: Path) -> None:
    bad = _swemill("traces", "ingest", str(tmp_path / "missing"), "--out", str(tmp_path / "o2"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"error: no such file or directory: {tmp_path / 'missing'}"]
    assert not (tmp_path / "o2" / "manifests").exists()
