"""``swemill tasks sample --strategies lm-modify,lm-rewrite --bug-writer SPEC``: valid tasks
from model-written bugs, every invalid answer a named drop, every call's cost in the manifest;
the same model writes the statements unless ``--issue-writer template``.

The model is the fake OpenAI-compatible server on loopback answering from a script
(``swemill_testkit.fake_bugwriter``); ``swemill tasks`` runs as a user runs it, in a
subprocess, and validates with the real gates and sandboxes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import swemill.repo.sample as sample_pkg
from swemill.core.records import CandidateRecord, Golden, Task
from swemill.store import Store
from swemill_testkit.fake_bugwriter import BugPrompt, bug_writer_script, is_issue_request
from swemill_testkit.fake_server import FakeOpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.network]

SAMPLE = Path(sample_pkg.__file__).parent / "tree"
MODIFY = ["edit", "diff", "bad_diff", "outside", "noop", "signature", "truncated"]
REWRITE = ["edit", "same_behaviour", "diff", "unparseable", "empty"]


def _plan(k: int, prompt: BugPrompt) -> str:
    kinds = REWRITE if prompt.rewrite else MODIFY
    return kinds[k % len(kinds)]


def _swemill(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWEMILL_CACHE": str(cache), "COLUMNS": "200"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "swemill", "tasks", *args], capture_output=True,
                          text=True, env=env, timeout=900)


def test_model_written_bugs_become_valid_tasks(shared_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "store"
    with FakeOpenAIServer(bug_writer_script(SAMPLE, _plan), price_in=3.0,
                          price_out=15.0) as srv:
        proc = _swemill("sample", "--out", str(out), "--strategies", "lm-modify,lm-rewrite",
                        "--bug-writer", f"openai:fake-writer@{srv.base_url}", "--max-usd", "0.5",
                        "--price", "3,15", "--max-tasks", "4", "--workers", "2", "--run-id",
                        "lm", "--json", cache=shared_cache)
        n_issues = sum(is_issue_request(r.body) for r in srv.requests)
        n_requests = len(srv.requests) - n_issues  # bug-writing calls
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["tasks"] >= 3 and summary["audit_rejected"] == {}  # audited cold: all hold
    store = Store(str(out))
    tasks = store.read_records("tasks", "lm", Task)
    goldens = {g.instance_id: g for g in store.read_records("golden", "lm", Golden)}
    assert {t.strategy for t in tasks} == {"lm-modify", "lm-rewrite"}
    # no --issue-writer: the bug writer wrote every statement (one call per task written)
    assert n_issues == len(tasks) == summary["tasks"]
    for t in tasks:
        assert (t.metadata["statement"], t.metadata["statement_by"]) == (
            "written", f"openai:fake-writer@{srv.base_url}")
        assert "that passed before" in t.problem_statement
        assert all(test in t.problem_statement for test in t.FAIL_TO_PASS[:8])
        prov = t.metadata["provenance"]
        assert prov["model"] == "fake-writer" and prov["prompt"] == t.strategy
        assert prov["prompt_version"] == "1" and t.FAIL_TO_PASS
        assert goldens[t.instance_id].bug_patch.count("diff --git") == 1
    # every answer is a candidate row (validated or refused) or counted as not needed
    rows = store.read_records("candidates", "lm", CandidateRecord)
    reasons = Counter(r.reason for r in rows if r.verdict == "dropped")
    for reason in ("answer_bad_diff", "answer_outside_function", "answer_no_op",
                   "answer_unparseable", "answer_empty"):
        assert reasons[reason] >= 1, reasons
    y = summary["yields"]
    leftovers = sum(v["skipped"].get("not_needed", 0) for v in y.values())
    assert len(rows) + leftovers == n_requests == sum(v["calls"] for v in y.values())
    assert any(line.startswith("top drop reasons") for line in summary["drop_lines"])
    # the costs: each call's, bug and issue writing, summed into the manifest, under the ceiling
    manifest = store.read_manifest("lm")
    spent = sum(v["cost_usd"] for v in y.values())
    stated = sum(v["statement_cost_usd"] for v in y.values() if v["tasks"])
    assert sum(v.get("statement_calls", 0) for v in y.values()) == n_issues
    assert spent > 0 and stated > 0
    assert manifest.cost_usd == pytest.approx(spent + stated) and manifest.cost_usd <= 0.5
    iw = manifest.metadata["issue_writer"]
    assert (iw["calls"], iw["model"]) == (n_issues, "fake-writer")
    assert iw["cost_usd"] == pytest.approx(stated)
    bw = manifest.metadata["bug_writer"]
    assert bw["calls"] == n_requests and bw["prompts"] == {"lm-modify": "1", "lm-rewrite": "1"}
    assert manifest.metadata["tasks_sources"]["sample"]["lm-modify"]["cost_usd"] > 0


def test_issue_writer_template_keeps_the_template(shared_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "store"
    with FakeOpenAIServer(bug_writer_script(SAMPLE, ["edit"]), price_in=3.0,
                          price_out=15.0) as srv:
        proc = _swemill("sample", "--out", str(out), "--strategies", "lm-modify",
                        "--bug-writer", f"openai:fake-writer@{srv.base_url}", "--price", "3,15",
                        "--issue-writer", "template", "--max-tasks", "1", "--workers", "2",
                        "--audit", "0", "--run-id", "tp", "--json", cache=shared_cache)
        asked = [is_issue_request(r.body) for r in srv.requests]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert asked and not any(asked)  # bugs were asked for, statements were not
    store = Store(str(out))
    [task] = store.read_records("tasks", "tp", Task)
    assert (task.metadata["statement"], task.metadata["statement_by"]) == ("written", "template")
    assert "Failing tests:" in task.problem_statement
    assert "issue_writer" not in store.read_manifest("tp").metadata


def test_a_correct_rewrite_is_dropped_as_no_bug(shared_cache: Path, tmp_path: Path) -> None:
    with FakeOpenAIServer(bug_writer_script(SAMPLE, ["same_behaviour"])) as srv:
        proc = _swemill("sample", "--out", str(tmp_path / "s"), "--strategies", "lm-rewrite",
                        "--bug-writer", f"openai:fake-writer@{srv.base_url}", "--max-tasks", "1",
                        "--workers", "2", "--run-id", "rw", "--json", cache=shared_cache)
    assert proc.returncode == 1, proc.stderr[-3000:]  # no task: every rewrite was right
    summary = json.loads(proc.stdout)
    drops = summary["yields"]["lm-rewrite"]["drops"]
    assert drops.get("rewrite_passes_tests", 0) >= 3 and "no_fail_to_pass" not in drops


def test_bad_bug_writer_settings_are_one_line(tmp_path: Path) -> None:
    cases = [
        (["--strategies", "lm-modify"], "the lm-modify strategy needs a model: --bug-writer"),
        (["--strategies", "lm-rewrite", "--bug-writer", "nosuch:m"],
         "unknown bug writer 'nosuch:m'"),
        (["--strategies", "lm-modify", "--bug-writer", "openai:fake@http://127.0.0.1:9/v1",
          "--max-usd", "1"], "no price known for model 'fake'"),
        (["--strategies", "lm-modify", "--bug-writer", "openai:fake@http://127.0.0.1:9/v1",
          "--price", "cheap"], "--price must be 'IN,OUT'"),
    ]
    for args, message in cases:
        proc = _swemill("sample", "--out", str(tmp_path), *args, cache=tmp_path / "cache")
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
