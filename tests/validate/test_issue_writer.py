"""``swemill tasks --issue-writer SPEC``: a model writes the statements from the failing
tests' evidence; one that leaks falls back to the template and is counted.

The model is the fake OpenAI-compatible server on loopback (real HTTP); ``swemill tasks``
runs as a user runs it, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from swemill.core.records import Golden, Task
from swemill.store import Store
from swemill_testkit.fake_server import FakeOpenAIServer, FakeReply, text_reply

pytestmark = [pytest.mark.slow, pytest.mark.network]

CLEAN = ("Since the last update some results come out wrong: the failing tests expect one "
         "value and get another, while the rest of the library behaves as before.")
LEAKY = "The fix is easy:\ndiff --git a/lib.py b/lib.py\n@@ -1,2 +1,2 @@\n-x\n+y\n"


def test_model_statements_are_used_unless_they_leak(shared_cache: Path, tmp_path: Path) -> None:
    lock, answered = threading.Lock(), []

    def script(body: dict[str, Any]) -> FakeReply:
        with lock:  # first request clean, second leaky
            answered.append(body)
            return text_reply(CLEAN if len(answered) == 1 else LEAKY)

    out = tmp_path / "store"
    with FakeOpenAIServer(script) as srv:
        env = {**os.environ, "SWEMILL_CACHE": str(shared_cache), "COLUMNS": "200"}
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.run(
            [sys.executable, "-m", "swemill", "tasks", "sample", "--out", str(out),
             "--strategies", "procedural", "--max-tasks", "2", "--workers", "2", "--run-id",
             "iw", "--audit", "0", "--issue-writer", f"openai:fake-writer@{srv.base_url}",
             "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["tasks"] == 2 and len(answered) == 2
    y = summary["yields"]["procedural"]
    assert y["statement_fallback"] == 1 and y["statement_fallbacks"] == {"leak": 1}
    assert y["statement_calls"] == 2
    store = Store(str(out))
    manifest = store.read_manifest("iw")
    counts = manifest.metadata["tasks_sources"]["sample"]["procedural"]["counts"]
    assert counts["statement_fallback"] == counts["statement_fallback_leak"] == 1
    assert manifest.metadata["issue_writer"]["calls"] == 2
    tasks = {t.instance_id: t for t in store.read_records("tasks", "iw", Task)}
    goldens = {g.instance_id: g for g in store.read_records("golden", "iw", Golden)}
    how = sorted((t.metadata["statement"], t.problem_statement) for t in tasks.values())
    assert how[0] == ("fallback", how[0][1]) and how[1] == ("written", CLEAN + "\n")
    by = sorted((t.metadata["statement_by"], t.metadata.get("statement_fallback"))
                for t in tasks.values())
    assert by == [(f"openai:fake-writer@{srv.base_url}", None), ("template", "leak")]
    fallback = how[0][1]
    assert "Failing tests:" in fallback and "diff --git" not in fallback
    # the model saw the failing tests and nothing of either patch
    for body in answered:
        prompt = "\n".join(str(m.get("content")) for m in body["body"]["messages"])
        assert "Failing tests:" in prompt and "diff --git" not in prompt
        for g in goldens.values():
            changed = [ln[1:].strip() for ln in g.bug_patch.splitlines()
                       if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
            assert not [ln for ln in changed if len(ln) >= 12 and ln in prompt]


def test_an_unknown_issue_writer_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "swemill", "tasks", "sample", "--out", str(tmp_path),
         "--issue-writer", "nosuch:model"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown issue writer 'nosuch:model'" in proc.stderr
