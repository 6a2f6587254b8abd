"""Validated tasks of the bundled sample repository, built once per session.

A small validator of its own: procedural candidates are applied to the sample, the suite runs
on the broken tree in a real sandbox, FAIL_TO_PASS / PASS_TO_PASS are read off the report, the
golden patch is the broken tree's diff back to the base, and the scrubbed broken tree is packed
as the task's snapshot. Tasks, goldens and snapshots go into a real store on disk.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from swemill.core.records import Golden, Task
from swemill.repo.envbuild import RepoEnv, build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import open_sandbox
from swemill.store import Store
from swemill.store.layout import shard_name, snapshot_key
from swemill.testing.runner import run_tests
from swemill.validate.scrub import scrub_tree
from swemill.validate.snapshot import pack_tree

RUN_ID = "agent-tasks"
N_TASKS = 4


@dataclass
class SampleTasks:
    root: Path
    run_id: str
    tasks: list[Task]
    goldens: dict[str, Golden]
    cache: Path
    env: RepoEnv

    @property
    def store(self) -> Store:
        return Store.open(str(self.root))


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                         input=stdin, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout


def _full_suite(path: Path, env: RepoEnv) -> dict[str, str]:
    with open_sandbox(path, binds=env.binds()) as sb:
        report = run_tests(sb, env, None, timeout=300)
    assert report.exit_code in (0, 1) and report.collected, report.problem
    return {t: r.outcome for t, r in report.results.items()}


def build_sample_tasks(root: Path, cache: Path, work: Path, n: int = N_TASKS) -> SampleTasks:
    from swemill.synth import RepoView, make_strategy

    src = resolve_source("sample", cache=cache)
    env = build_env(src, cache=cache)
    base = _full_suite(src.path, env)
    passing = {t for t, o in base.items() if o == "passed"}
    store = Store.open(str(root))
    view = RepoView(root=src.path, repo=src.repo, commit=src.commit, max_candidates=40, seed=3)
    tasks: list[Task] = []
    goldens: dict[str, Golden] = {}
    for cand in make_strategy("procedural").candidates(view):
        tree = work / cand.candidate_id
        shutil.copytree(src.path, tree, symlinks=True)
        _git(tree, "apply", "-", stdin=cand.bug_patch)
        broken = _full_suite(tree, env)
        f2p = sorted(t for t in passing if broken.get(t) != "passed")
        p2p = sorted(t for t in passing if broken.get(t) == "passed")
        if not f2p or not p2p or len(f2p) > 12:
            continue
        golden_patch = _git(tree, "diff", "-R")
        scrub_tree(tree)
        key = snapshot_key(RUN_ID, cand.candidate_id)
        store.put_bytes(key, pack_tree(tree))
        tasks.append(Task(
            instance_id=cand.candidate_id, repo=src.repo, base_commit=src.commit,
            problem_statement="These tests fail:\n" + "\n".join(f2p), FAIL_TO_PASS=f2p,
            PASS_TO_PASS=p2p, test_cmd="pytest", strategy="procedural",
            license_tier="redistributable", env_recipe=env.key, snapshot=key,
            metadata={"source": "sample"}))
        goldens[cand.candidate_id] = Golden(instance_id=cand.candidate_id,
                                            bug_patch=cand.bug_patch, golden_patch=golden_patch)
        if len(tasks) >= n:
            break
    assert len(tasks) == n, f"only {len(tasks)} usable candidates"
    store.write_records("tasks", RUN_ID, shard_name(0, 1), tasks)
    store.write_records("golden", RUN_ID, shard_name(0, 1), list(goldens.values()))
    return SampleTasks(root, RUN_ID, tasks, goldens, cache, env)


@pytest.fixture(scope="session")
def sample_tasks(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> SampleTasks:
    root = tmp_path_factory.mktemp("agent-store")
    return build_sample_tasks(root, shared_cache, tmp_path_factory.mktemp("agent-work"))


@pytest.fixture
def fresh_store(sample_tasks: SampleTasks, tmp_path: Path) -> Iterator[Store]:
    """A copy of the task store that a test may write its rollouts into."""
    root = tmp_path / "store"
    shutil.copytree(sample_tasks.root, root)
    yield Store.open(str(root))
