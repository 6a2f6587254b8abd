"""The commands end to end: `traces ingest` -> `replay` -> `corpus` gives DPO rows; bad input
is one red line and exit code 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from swemill_testkit.fake_server import Step, tool_reply

from .conftest import teachers, write_session

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "claude_code"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def swemill(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


class Recorder:
    """Answers `bash ls` and keeps the tool names each request's history carries."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Step:
        with self.lock:
            for m in request["body"].get("messages", []):
                self.names += [c["function"]["name"] for c in m.get("tool_calls") or []]
        return tool_reply("bash", {"command": "ls"})


@pytest.mark.slow
def test_ingest_replay_corpus_gives_dpo_rows(tmp_path: Path) -> None:
    sources = [FIXTURES] if FIXTURES.is_dir() else [
        write_session(tmp_path / "logs" / "a.jsonl", 4, errors={1})]
    out = str(tmp_path / "store")
    ingest = swemill("traces", "ingest", *map(str, sources), "--out", out, "--run-id", "e2e",
                     "--json")
    assert ingest.returncode == 0, ingest.stderr
    scripts = [Recorder() for _ in range(3)]
    with teachers(scripts) as specs:  # type: ignore[arg-type]
        done = swemill("replay", "--traces", "e2e", "--teachers", ",".join(specs),
                       "--max-usd", "0.5", "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["counts"]["pairs"] > 0 and 0 < summary["cost_usd"] <= 0.5
    assert summary["counts"]["replies_ok"] == 3 * summary["counts"]["in"]
    # Histories with tools outside the algebra (TodoWrite...) reached teachers as text.
    names = [n for s in scripts for n in s.names]
    assert names and all(TOOL_NAME.match(n) for n in names)
    corpus = swemill("corpus", "--run", "e2e", "--out", out, "--json", "--holdout", "0")
    assert corpus.returncode == 0, corpus.stderr
    rows = json.loads(corpus.stdout)["rows"]
    assert rows["dpo"] > 0
    dpo = pq.read_table(next((tmp_path / "store" / "corpus" / "dpo" / "run_id=e2e").glob(
        "*.parquet"))).to_pylist()
    assert {r["preference_source"] for r in dpo} <= {"consensus", "error_signal"}
    assert all(r["source"] == "replay" and r["state_id"] for r in dpo)


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from swemill.store import Store
    from swemill.traces import ingest

    out = str(tmp_path / "store")
    ingest([write_session(tmp_path / "a.jsonl", 1)], Store.open(out), run_id="bad")
    env = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")}
    for teachers_arg, words in [
        ("openai:gpt-4o,openai:gpt-4.1-mini,openai:o3", "1 model family"),
        ("vertex:gemini,openai:gpt-4o,anthropic:claude-haiku-4-5", "unknown teacher provider"),
        ("openai:gpt-4o,anthropic:claude-haiku-4-5,openrouter:qwen/qwen3-coder",
         "missing credentials"),
    ]:
        done = swemill("replay", "--traces", "bad", "--teachers", teachers_arg, "--out", out,
                       env=env)
        assert done.returncode == 2
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
        assert words in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "store" / "pairs").exists()
