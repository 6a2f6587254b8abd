"""Oracle cleanliness, as a property: nothing golden reaches what a policy is shown.

Hypothesis builds random tasks over random small Python packages. Every line of the fixed
code carries a random token that occurs nowhere else, and so does every helper the bug
deletes, so a golden token found anywhere is a leak, and a leak cannot hide. For each
example it checks:

* the ``Task`` record, as dumped and as written to Parquet, holds no golden token (its
  problem statement is written from failure reports whose quoted source lines are golden);
* the broken tree, after ``scrub_tree``, holds none in its files or its git objects — and
  before the scrub it did (git history, bytecode, ``.orig`` files), so the check is not idle;
* every SFT row's system and task messages and every DPO row's prompt hold none, while the
  rows keep the agent's own edits, which do contain golden code. Some trajectories come from
  a leaky harness that pasted a golden line or a deleted definition into the prompt: exactly
  those are dropped, with the reason ``golden_leak``.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import py_compile
import random
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swemill.core.errors import CorpusError
from swemill.core.records import (
    Golden,
    Message,
    Outcome,
    PreferencePair,
    Task,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Trajectory,
)
from swemill.core.tools import ToolCall
from swemill.corpus.assemble import CorpusConfig, assemble
from swemill.corpus.rows import prompt_messages
from swemill.corpus.split import SplitConfig
from swemill.store.parquet import rows_to_table, table_to_bytes
from swemill.synth.problem import FailingTest, write_problem_statement
from swemill.validate.scrub import scrub_tree

pytestmark = pytest.mark.slow

SYSTEM = "You are a careful engineer. The repository is in /workspace; fix the failing tests."


@dataclass
class World:
    """One random task: base and broken trees, golden record, its secret tokens."""

    base: dict[str, str]
    broken: dict[str, str]
    golden: Golden
    task: Task
    fixed_lines: list[str]
    deleted: list[str]
    tokens: set[str] = field(default_factory=set)


def _tok(rng: random.Random, kind: str) -> str:
    return f"{kind}{rng.getrandbits(48):012x}"


def _module(rng: random.Random, n_funcs: int, buggy: set[int], tokens: set[str],
            fixed: list[str], helper: str | None) -> tuple[str, str]:
    base, broken = ["import math", ""], ["import math", ""]
    for i in range(n_funcs):
        name = _tok(rng, "func_")
        good = f'    return (x * {rng.randint(2, 9)}, "{_tok(rng, "g")}")'
        head = [f"def {name}(x):", f'    """Scale x ({_tok(rng, "doc")})."""']
        base += [*head, good, ""]
        if i in buggy:
            bad = f'    return (x * {rng.randint(10, 19)}, "{_tok(rng, "b")}")'
            broken += [*head, bad, ""]
            fixed.append(good.strip())
            tokens.add(good.split('"')[1])
        else:
            broken += [*head, good, ""]
    if helper:  # a helper the bug deletes outright; nothing else refers to it
        base += [f"def {helper}(x):", f'    return "{_tok(rng, "h")}"', ""]
        tokens.add(helper)
        tokens.add(base[-2].split('"')[1])
    return "\n".join(base), "\n".join(broken)


def _diff(a: dict[str, str], b: dict[str, str]) -> str:
    out = []
    for path in sorted(a):
        out += difflib.unified_diff(a[path].splitlines(True), b[path].splitlines(True),
                                    f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def _failure(rng: random.Random, path: str, fixed_line: str) -> FailingTest:
    # A pytest long report: source lines quoted with '>' (here: the fixed code) and a
    # location line; only the 'E' lines describe the failure itself.
    got, want = rng.randint(20, 99), rng.randint(1, 19)
    report = (f"    def test_case():\n>       {fixed_line}\n{path}:4: in func\n"
              f"E       AssertionError: assert {got} == {want}\n")
    return FailingTest(f"tests/test_{_tok(rng, 't')}.py::test_case", report)


def make_world(seed: int, n_files: int, with_helper: bool) -> World:
    rng = random.Random(seed)
    tokens: set[str] = set()
    fixed: list[str] = []
    base, broken, deleted = {}, {}, []
    for f in range(n_files):
        path = f"pkg/mod{f}.py"
        n = rng.randint(2, 4)
        buggy = {rng.randrange(n)} if f == 0 or rng.random() < 0.5 else set()
        helper = _tok(rng, "helper_") if with_helper and f == 0 else None
        base[path], broken[path] = _module(rng, n, buggy, tokens, fixed, helper)
        if helper:
            deleted.append(f"{path}::{helper}")
    golden = Golden(instance_id=f"task-{seed}", bug_patch=_diff(base, broken),
                    golden_patch=_diff(broken, base), deleted_symbols=deleted)
    failures = [_failure(rng, "pkg/mod0.py", line) for line in fixed]
    task = Task(instance_id=golden.instance_id, repo=f"org/repo{seed % 3}", base_commit="b" * 40,
                problem_statement=write_problem_statement(failures, f"org/repo{seed % 3}"),
                FAIL_TO_PASS=[f.nodeid for f in failures], PASS_TO_PASS=[], test_cmd="pytest",
                strategy="procedural", license_tier="redistributable", env_recipe="env",
                snapshot="snap", metadata={"file": "pkg/mod0.py"})
    return World(base, broken, golden, task, fixed, deleted, tokens)


def _leaks(text: str, tokens: set[str]) -> set[str]:
    return {t for t in tokens if t in text}


# -- the broken tree ----------------------------------------------------------------------

def _git(root: Path, *args: str, data: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    return subprocess.run(["git", "-C", str(root), *args], input=data, env=env, check=True,
                          capture_output=True).stdout


def _tree_bytes(root: Path) -> bytes:
    files = b"".join(p.read_bytes() for p in root.rglob("*")
                     if p.is_file() and ".git" not in p.relative_to(root).parts)
    objects = _git(root, "cat-file", "--batch-all-objects", "--batch") if (root / ".git").exists()\
        else b""
    return files + objects


def check_tree(world: World) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        for path, text in world.base.items():  # the base tree is the fixed tree
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
            py_compile.compile(str(root / path), doraise=True)  # bytecode of the fix
            (root / (path + ".orig")).write_text(text)  # what `patch -b` leaves behind
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", "base")
        for path, text in world.broken.items():  # apply the bug
            (root / path).write_text(text)
        before = _tree_bytes(root).decode("utf-8", "replace")
        assert _leaks(before, world.tokens), "the unscrubbed tree should hold the fix"
        scrub_tree(root)
        after = _tree_bytes(root).decode("utf-8", "replace")
        assert not _leaks(after, world.tokens)
        assert _git(root, "rev-list", "--all").decode().count("\n") == 1
        assert all((root / p).read_text() == t for p, t in world.broken.items())


# -- the task record ----------------------------------------------------------------------

def check_task(world: World) -> None:
    dumped = world.task.model_dump_json()
    table = rows_to_table([world.task])
    stored = json.dumps(table.to_pylist()) + table_to_bytes(table).decode("latin-1")
    assert not _leaks(dumped, world.tokens) and not _leaks(stored, world.tokens)
    assert world.task.FAIL_TO_PASS[0] in world.task.problem_statement  # not an empty statement


# -- trajectories and pairs ---------------------------------------------------------------

def _plant(rng: random.Random, world: World) -> str:
    """What a leaky harness might paste: a golden line, or a deleted helper's definition."""
    if world.deleted and rng.random() < 0.5:
        name = world.deleted[0].rpartition("::")[2]
        return f"Hint: it used to start with\ndef {name}(value, *rest):\n"
    return f"Hint: the fixed line is `{rng.choice(world.fixed_lines)}`"


def _messages(rng: random.Random, world: World, leak_in: str | None, k: int) -> list[Message]:
    system, statement = SYSTEM, world.task.problem_statement
    if leak_in == "system":
        system += "\n" + _plant(rng, world)
    elif leak_in == "task":
        statement += "\n" + _plant(rng, world)
    path = "pkg/mod0.py"
    old = next(b for b, g in zip(world.broken[path].splitlines(), world.base[path].splitlines(),
                                 strict=False) if b != g)
    fix = world.fixed_lines[0]
    calls = [ToolCall("read", {"path": path}, id=f"c{k}a"),
             ToolCall("edit", {"path": path, "old_str": old.strip(), "new_str": fix}, id=f"c{k}b"),
             ToolCall("submit", {}, id=f"c{k}c")]
    results = [world.broken[path], "edited", "submitted"]  # what the sandbox shows
    msgs = [Message(role="system", content=[TextBlock(text=system)]),
            Message(role="user", content=[TextBlock(text=statement)])]
    for call, result in zip(calls, results, strict=True):
        msgs.append(Message(role="assistant", content=[TextBlock(text=f"step {k}"),
                                                       ToolUseBlock(call=call)]))
        msgs.append(Message(role="tool", content=[ToolResultBlock(call_id=call.id,
                                                                  content=result)]))
    return msgs


@dataclass
class Batch:
    trajectories: list[Trajectory] = field(default_factory=list)
    pairs: list[PreferencePair] = field(default_factory=list)
    planted: set[str] = field(default_factory=set)


def build_batch(rng: random.Random, worlds: list[World], per_task: int) -> Batch:
    batch = Batch()
    for world in worlds:
        for k in range(per_task):
            leak_in = rng.choice([None, None, "system", "task"])
            tid = f"{world.task.instance_id}-t{k}"
            msgs = _messages(rng, world, leak_in, k)
            batch.trajectories.append(Trajectory(
                trajectory_id=tid, task_id=world.task.instance_id, source="rollout",
                policy="scripted:oracle", messages=msgs, synthetic=True,
                outcome=Outcome(grade=1.0, resolved=True), license_tier="redistributable"))
            wrong = [m.model_copy(deep=True) for m in msgs[4:]]
            wrong[0].content[1].call.args["new_str"] = "return None"
            pid = f"{world.task.instance_id}-p{k}"
            batch.pairs.append(PreferencePair(
                pair_id=pid, prompt=msgs[:4], chosen=msgs[4:], rejected=wrong,
                preference_source="execution", task_id=world.task.instance_id, synthetic=True))
            if leak_in:
                batch.planted |= {tid, pid}
    return batch


def check_rows(worlds: list[World], batch: Batch) -> None:
    tokens = set().union(*(w.tokens for w in worlds))
    everything = {t.trajectory_id for t in batch.trajectories} | {p.pair_id for p in batch.pairs}
    run = functools.partial(
        assemble, batch.trajectories, batch.pairs,
        tasks={w.task.instance_id: w.task for w in worlds},
        goldens={w.golden.instance_id: w.golden for w in worlds},
        config=CorpusConfig(dedup=False, split=SplitConfig(near_dup_threshold=None)))
    if batch.planted == everything:  # every row leaked: an error, never an empty dataset
        with pytest.raises(CorpusError, match="golden_leak"):
            run()
        return
    out = run()
    sft, dpo = out.sft + out.sft_holdout, out.dpo + out.dpo_holdout
    for row in sft:
        shown = json.dumps(prompt_messages(row["messages"]))
        assert not _leaks(shown, tokens), row["trajectory_id"]
        assert _leaks(json.dumps(row["messages"]), tokens)  # the agent's own fix is kept
    for row in dpo:
        assert not _leaks(json.dumps(prompt_messages(row["prompt"])), tokens), row["pair_id"]
        assert _leaks(json.dumps(row["chosen"]), tokens)
    leaked = {d.item_id for d in out.drops if d.reason == "golden_leak"}
    assert leaked == batch.planted  # every planted leak caught, no clean row dropped
    kept = {r["trajectory_id"] for r in sft} | {r["pair_id"] for r in dpo}
    assert kept == everything - batch.planted


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_tasks=st.integers(1, 3), n_files=st.integers(1, 3),
       with_helper=st.booleans(), per_task=st.integers(1, 3))
def test_nothing_golden_reaches_a_policy(seed, n_tasks, n_files, with_helper, per_task):
    worlds = [make_world(seed + i, n_files, with_helper) for i in range(n_tasks)]
    for world in worlds:
        assert world.tokens and not _leaks("\n".join(world.broken.values()), world.tokens)
        check_task(world)
    check_tree(worlds[0])
    check_rows(worlds, build_batch(random.Random(seed), worlds, per_task))
