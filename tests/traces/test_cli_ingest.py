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
from swemill.traces.load import load_quarantine, load_states, load_trajectories
from swemill_testkit.fake_sessions import SessionWriter, text, tool_use


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


@pytest.mark.slow
def test_all_garbage_input_is_quarantined_and_exits_non_zero(tmp_path: Path) -> None:
    # It used to exit 0 with a "complete" run that held nothing.
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "binary.jsonl").write_bytes(bytes(range(256)) * 64)
    (junk / "deep.jsonl").write_bytes(b"[" * 200_000 + b"]" * 200_000 + b"\n")
    (junk / "text.jsonl").write_text("not json\n{\"type\": \"summary\"}\n")
    (junk / "notes.md").write_text("not a session")
    out = tmp_path / "store"
    proc = _swemill("traces", "ingest", str(junk), "--out", str(out), "--run-id", "g1",
                    "--json")
    assert proc.returncode == 1, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "nothing usable in 4 file(s)" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "failed" and report["counts"]["trajectories"] == 0
    store = Store.open(str(out))
    manifest = store.read_manifest("g1")
    assert manifest.status == "failed" and manifest.finished_at
    assert manifest.metadata["error"] == errors[0].removeprefix("error: ")
    reasons = {(Path(q.file).name, q.reason.split(" at ")[0].split(":")[0].split(" (")[0])
               for q in load_quarantine(store, "g1")}
    assert {("deep.jsonl", "nested deeper than 100 levels"), ("binary.jsonl", "invalid UTF-8"),
            ("text.jsonl", "not JSON"), ("notes.md", "not a trace file")} <= reasons


@pytest.mark.slow
def test_sigterm_mid_ingest_leaves_a_failed_manifest(tmp_path: Path) -> None:
    import os
    import signal
    import time

    from swemill_testkit.fake_sessions import generate_session_file

    generate_session_file(tmp_path / "in" / "long.jsonl", 40 * 2**20)
    out = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "swemill", "traces", "ingest",
                             str(tmp_path / "in"), "--out", str(out), "--run-id", "t1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    manifest = out / "manifests" / "run_id=t1.json"
    end = time.monotonic() + 60
    while not manifest.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    m = Store.open(str(out)).read_manifest("t1")
    assert m.status == "failed" and m.metadata["error"] == "terminated by SIGTERM"
