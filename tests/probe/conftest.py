"""A run with a corpus in a real store, and the probe's own environment (.venv-probe).

The corpus is made here with the corpus stage (``run_corpus``) from records shaped like
rollouts. torch lives only in .venv-probe (``make setup`` builds it), so everything that
trains runs there, in a subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from swemill.core.records import (
    Golden,
    Message,
    Outcome,
    PreferencePair,
    RunManifest,
    Task,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.core.tools import ToolCall
from swemill.corpus.assemble import CorpusConfig
from swemill.corpus.split import SplitConfig
from swemill.corpus.stage import run_corpus
from swemill.store import Store

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE_PYTHON = REPO_ROOT / ".venv-probe" / "bin" / "python"
REPOS = ("acme/inventory", "acme/ledger", "acme/shipping", "acme/billing")
NOUNS = ("count", "total", "balance", "weight", "stock", "price", "quota", "limit", "score",
         "level", "credit", "volume", "margin", "offset", "budget", "reserve")
SYSTEM = "You are a software engineer in /workspace. Use the tools to fix the failing test."


def run_probe_python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python ARGS...`` in .venv-probe, offline, from the repository root."""
    # One torch thread: on a shared 2-core machine a second one spins against other work and
    # makes a tiny model's forward pass 5-20x slower.
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    return subprocess.run([str(PROBE_PYTHON), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO_ROOT)


def swemill_main(*args: str) -> subprocess.CompletedProcess:
    """``swemill`` in the main environment (no torch there)."""
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=120)


def _task(i: int) -> Task:
    repo, noun = REPOS[i % len(REPOS)], NOUNS[i % len(NOUNS)]
    return Task(
        instance_id=f"{repo.replace('/', '__')}-{i}", repo=repo, base_commit="c0ffee",
        problem_statement=f"test_{noun}_{i} fails: after update({i}) the {noun} is wrong.",
        FAIL_TO_PASS=[f"tests/test_{noun}.py::test_{noun}_{i}"], PASS_TO_PASS=["tests/t.py::t"],
        test_cmd="pytest", strategy="procedural", license_tier="redistributable",
        env_recipe="e", snapshot="s",
    )


def _golden(t: Task, i: int) -> Golden:
    noun = NOUNS[i % len(NOUNS)]
    head = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n"
    return Golden(instance_id=t.instance_id,
                  bug_patch=f"{head}-x.{noun} += {i}\n+x.{noun} -= {i}\n",
                  golden_patch=f"{head}-x.{noun} -= {i}\n+x.{noun} += {i}\n")


def _turns(t: Task, i: int, fixed: bool) -> list[Message]:
    noun = NOUNS[i % len(NOUNS)]
    path = f"{t.repo.split('/')[1]}/{noun}.py"
    new = f"self.{noun} += amount" if fixed else f"self.{noun} = amount"

    def call(name: str, args: dict, cid: str, text: str = "") -> Message:
        blocks: list = [TextBlock(text=text)] if text else []
        return Message(role="assistant",
                       content=[*blocks, ToolUseBlock(call=ToolCall(name, args, id=cid))])

    def result(cid: str, text: str, error: bool = False) -> Message:
        return Message(role="tool", content=[ToolResultBlock(call_id=cid, content=text,
                                                             is_error=error)])

    return [
        Message(role="system", content=[TextBlock(text=SYSTEM)]),
        Message(role="user", content=[TextBlock(text=t.problem_statement)]),
        call("read", {"path": path}, f"r{i}", f"The {noun} update looks wrong; reading {path}."),
        result(f"r{i}", f"   1\tclass Item:\n   2\t    def update(self, amount):\n"
                        f"   3\t        self.{noun} -= amount\n"),
        call("edit", {"path": path, "old_str": f"self.{noun} -= amount", "new_str": new}, f"e{i}"),
        result(f"e{i}", f"edited {path}"),
        call("run_tests", {"tests": t.FAIL_TO_PASS}, f"t{i}"),
        result(f"t{i}", "1 passed" if fixed else f"1 failed: assert {i} == {2 * i + 1}",
               error=not fixed),
        call("submit", {}, f"s{i}", "The fix is in place." if fixed else ""),
        result(f"s{i}", "submitted"),
    ]


def seed_run(root: str, run_id: str, *, n: int = 16, pairs: bool = True,
             trajectories: bool = True, holdout: float = 0.25) -> Store:
    """Write tasks, goldens, trajectories and pairs of ``n`` tasks, then the run's corpus."""
    store = Store.open(root)
    tasks = [_task(i) for i in range(n)]
    store.write_manifest(RunManifest(run_id=run_id, command="test", source="probe-tests"))
    store.write_records("tasks", run_id, "00000-of-00001", tasks)
    store.write_records("golden", run_id, "00000-of-00001",
                        [_golden(t, i) for i, t in enumerate(tasks)])
    if trajectories:
        store.write_records("trajectories", run_id, "00000-of-00001", [Trajectory(
            trajectory_id=f"traj-{t.instance_id}", task_id=t.instance_id, source="rollout",
            policy="scripted:oracle", messages=_turns(t, i, True), synthetic=True,
            outcome=Outcome(grade=1.0, resolved=True), license_tier="redistributable",
        ) for i, t in enumerate(tasks)])
    if pairs:
        rows = []
        for i, t in enumerate(tasks):
            good, bad = _turns(t, i, True), _turns(t, i, False)
            rows.append(PreferencePair(
                pair_id=f"pair-{t.instance_id}", prompt=good[:2], chosen=good[2:],
                rejected=bad[2:], preference_source="execution", chosen_score=1.0,
                rejected_score=0.0, task_id=t.instance_id, synthetic=True,
                license_tier="redistributable"))
        store.write_records("pairs", run_id, "00000-of-00001", rows)
    split = SplitConfig(holdout_fraction=holdout, seed=0, near_dup_threshold=None)
    run_corpus(store, run_id, CorpusConfig(split=split))
    return store


def probe_json(store: Store, run_id: str) -> dict:
    return json.loads(store.read_text(f"reports/run_id={run_id}/probe.json"))


def probe_cli(*args: str) -> subprocess.CompletedProcess:
    """``swemill probe ARGS...`` in .venv-probe."""
    return run_probe_python("-m", "swemill", "probe", *args)


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for tests that do not need .venv-probe."""
    return SimpleNamespace(seed=seed_run, result=probe_json, main=swemill_main)


@pytest.fixture
def probe_kit(kit: SimpleNamespace) -> SimpleNamespace:
    """The helpers, plus .venv-probe's python (``make setup`` builds it)."""
    if os.environ.get("SWEMILL_NO_PROBE") == "1":
        pytest.skip("SWEMILL_NO_PROBE=1: .venv-probe was not built")
    if not PROBE_PYTHON.exists():
        pytest.fail(f"{PROBE_PYTHON} is missing: run `make setup` (scripts/setup_probe.sh)")
    return SimpleNamespace(**vars(kit), python=run_probe_python, probe=probe_cli)


def _swemill(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "swemill", *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ))


def _script(command: str):  # type: ignore[no-untyped-def]
    from swemill_testkit.fake_server import tool_reply

    return lambda request: tool_reply("bash", {"command": command})


@pytest.fixture(scope="session")
def replay_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Sessions ingested, replayed across three fake teachers (the OpenAI wire format on
    loopback), made into DPO rows by ``swemill corpus``: (store root, run id)."""
    from tests.replay.conftest import teachers, write_session

    tmp = tmp_path_factory.mktemp("replay-corpus")
    for i in range(3):
        write_session(tmp / "logs" / f"s{i}.jsonl", 4, errors={1, 2}, session=f"sess{i}")
    out = str(tmp / "store")
    done = _swemill("traces", "ingest", str(tmp / "logs"), "--out", out, "--run-id", "rp",
                    "--json")
    assert done.returncode == 0, done.stderr
    # two teachers agree, one differs: consensus pairs; failing session turns: error pairs
    with teachers([_script("pytest -q"), _script("pytest -q"), _script("ls")]) as specs:
        done = _swemill("replay", "--traces", "rp", "--teachers", ",".join(specs),
                        "--max-usd", "0.5", "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    done = _swemill("corpus", "--run", "rp", "--out", out, "--json", "--holdout", "0")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"]["dpo"] > 0
    return out, "rp"
