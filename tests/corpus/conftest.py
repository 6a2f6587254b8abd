"""Records for the corpus-row tests: tasks, goldens, trajectories and pairs shaped like rollouts."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from swemill.core.records import (
    Golden,
    Message,
    Outcome,
    PreferencePair,
    Task,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.core.tools import ToolCall

SYSTEM = "You are a software engineer working in /workspace. Use the tools to fix the bug."


def task(i: int, repo: str = "acme/inventory", strategy: str = "procedural") -> Task:
    return Task(
        instance_id=f"{repo.replace('/', '__')}-{i}", repo=repo, base_commit="c0ffee",
        problem_statement=f"test_stock_{i} fails: restocking item {i} leaves the count as it was.",
        FAIL_TO_PASS=[f"tests/test_stock.py::test_stock_{i}"], PASS_TO_PASS=["tests/test_a.py::t"],
        test_cmd="pytest", strategy=strategy, license_tier="redistributable", env_recipe="e",
        snapshot="s", metadata={"file": f"inventory/mod{i % 3}.py"},
    )


def golden(t: Task, i: int) -> Golden:
    fixed = f"        self.count_{i} += quantity_{i}"
    broken = f"        self.count_{i} -= quantity_{i}"
    bug = (f"--- a/inventory/mod.py\n+++ b/inventory/mod.py\n@@ -3,3 +3,3 @@\n"
           f"     def restock(self):\n-{fixed}\n+{broken}\n         return self\n")
    fix = (f"--- a/inventory/mod.py\n+++ b/inventory/mod.py\n@@ -3,3 +3,3 @@\n"
           f"     def restock(self):\n-{broken}\n+{fixed}\n         return self\n")
    return Golden(instance_id=t.instance_id, bug_patch=bug, golden_patch=fix)


def _call(name: str, args: dict, cid: str) -> Message:
    return Message(role="assistant", content=[ToolUseBlock(call=ToolCall(name, args, id=cid))])


def _result(cid: str, text: str, error: bool = False) -> Message:
    block = ToolResultBlock(call_id=cid, content=text, is_error=error)
    return Message(role="tool", content=[block])


def conversation(t: Task, i: int, *, fixed: bool = True) -> list[Message]:
    new = f"self.count_{i} += quantity_{i}" if fixed else f"self.count_{i} = quantity_{i}"
    return [
        Message(role="system", content=[TextBlock(text=SYSTEM)]),
        Message(role="user", content=[TextBlock(text=t.problem_statement)]),
        Message(role="assistant", content=[
            ThinkingBlock(text=f"The restock of item {i} probably subtracts.", signature="sig"),
            TextBlock(text="Let me read the module."),
            ToolUseBlock(call=ToolCall("read", {"path": "inventory/mod.py"}, id=f"r{i}")),
        ]),
        _result(f"r{i}", f"   1\tclass Stock:\n   4\t        self.count_{i} -= quantity_{i}\n"),
        _call("edit", {"path": "inventory/mod.py", "old_str": f"self.count_{i} -= quantity_{i}",
                       "new_str": new}, f"e{i}"),
        _result(f"e{i}", "edited inventory/mod.py"),
        _call("run_tests", {"tests": [f"tests/test_stock.py::test_stock_{i}"]}, f"t{i}"),
        _result(f"t{i}", "1 passed" if fixed else "1 failed: assert 3 == 5", error=not fixed),
        _call("submit", {}, f"s{i}"),
        _result(f"s{i}", "submitted"),
    ]


def trajectory(t: Task, i: int, *, fixed: bool = True, **kw: object) -> Trajectory:
    data: dict = dict(
        trajectory_id=f"traj-{t.instance_id}-{int(fixed)}", task_id=t.instance_id,
        source="rollout", policy="scripted:oracle", messages=conversation(t, i, fixed=fixed),
        outcome=Outcome(grade=1.0 if fixed else 0.0, resolved=fixed), synthetic=True,
        license_tier="redistributable",
    )
    data.update(kw)
    return Trajectory(**data)


def pair(t: Task, i: int) -> PreferencePair:
    good, bad = conversation(t, i), conversation(t, i, fixed=False)
    return PreferencePair(
        pair_id=f"pair-{t.instance_id}", prompt=good[:4], chosen=good[4:], rejected=bad[4:],
        preference_source="execution", chosen_score=1.0, rejected_score=0.0,
        task_id=t.instance_id, synthetic=True, license_tier="redistributable",
    )


@dataclass
class Corpus:
    tasks: dict[str, Task]
    goldens: dict[str, Golden]
    trajectories: list[Trajectory]
    pairs: list[PreferencePair]


@pytest.fixture
def corpus() -> Corpus:
    """Eight tasks over two repositories: one solved trajectory and one pair per task."""
    tasks, goldens, trajs, pairs = {}, {}, [], []
    for i in range(8):
        t = task(i, repo="acme/inventory" if i < 5 else "acme/ledger",
                 strategy="procedural" if i % 2 else "pr-mirror")
        tasks[t.instance_id] = t
        goldens[t.instance_id] = golden(t, i)
        trajs.append(trajectory(t, i))
        pairs.append(pair(t, i))
    return Corpus(tasks, goldens, trajs, pairs)


@pytest.fixture
def build() -> SimpleNamespace:
    """The builders above, for tests that need variations."""
    return SimpleNamespace(task=task, golden=golden, trajectory=trajectory, pair=pair,
                           conversation=conversation, system=SYSTEM)
