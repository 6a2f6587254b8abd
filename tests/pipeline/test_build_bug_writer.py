"""``swemill build --bug-writer SPEC --max-usd X``: the model-written bugs become tasks, the
same model writes their statements (no ``--issue-writer``), both kinds of call are booked in
the build's manifest, and the rollouts get what the two writers left of X.

The bug writer is the fake OpenAI-compatible server on loopback answering from a script;
the rollout policy is the oracle (no model, no cost)."""

from __future__ import annotations

from pathlib import Path

import pytest

import swemill.repo.sample as sample_pkg
from swemill.core.records import Task
from swemill.store import Store
from swemill_testkit.fake_bugwriter import bug_writer_script, is_issue_request
from swemill_testkit.fake_server import FakeOpenAIServer

from .conftest import needs_full_build

pytestmark = [pytest.mark.slow, pytest.mark.network, needs_full_build]

SAMPLE = Path(sample_pkg.__file__).parent / "tree"


def test_build_passes_the_bug_writer_and_splits_the_budget(cli, build_cache: Path,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "out"
    kinds = ["edit", "diff", "noop"]
    with FakeOpenAIServer(bug_writer_script(SAMPLE, lambda k, _p: kinds[k % 3]), price_in=3.0,
                          price_out=15.0) as srv:
        out = cli.build_json(
            "sample", "--out", str(root), "--strategies", "lm-modify", "--bug-writer",
            f"openai:fake-writer@{srv.base_url}", "--price", "3,15", "--max-usd", "1",
            "--policy", "oracle", "--samples", "1", "--max-tasks", "2", "--workers", "2",
            "--audit", "0", cache=build_cache)
        n_issues = sum(is_issue_request(r.body) for r in srv.requests)
        n_requests = len(srv.requests) - n_issues
    store = Store.open(str(root))
    run = out["run_id"]
    tasks = store.read_records("tasks", run, Task)
    assert len(tasks) == 2 and {t.strategy for t in tasks} == {"lm-modify"}
    assert all(t.metadata["provenance"]["model"] == "fake-writer" for t in tasks)
    assert all(t.metadata["statement_by"].startswith("openai:fake-writer@") for t in tasks)
    m = store.read_manifest(run)
    spent = m.metadata["bug_writer"]["cost_usd"]
    stated = m.metadata["issue_writer"]["cost_usd"]
    assert m.metadata["bug_writer"]["calls"] == n_requests and 0 < spent < 1
    assert m.metadata["issue_writer"]["calls"] == n_issues == 2 and stated > 0
    assert m.cost_usd == pytest.approx(spent + stated)  # the oracle's rollouts cost nothing
    assert m.metadata["rollouts"]["config"]["max_usd"] == pytest.approx(1 - spent - stated)
    assert m.config["tasks"]["bug_writer"].startswith("openai:fake-writer@")


def test_build_refuses_a_bad_price_in_one_line(cli, tmp_path: Path) -> None:
    proc = cli.run("build", "sample", "--out", str(tmp_path / "o"), "--price", "free",
                   cache=tmp_path / "cache")
    assert "--price must be 'IN,OUT'" in cli.error_line(proc)
