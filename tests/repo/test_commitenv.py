"""Which base commits get an environment of their own (``repo.commitenv``), decided without
building anything: by what each commit declares, in the order candidates are admitted, at most
``limit`` per run. (Building and using one is tested in tests/validate/test_commit_envs.py.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

from swemill.repo.commitenv import CommitEnvs
from swemill.repo.envbuild import RepoEnv
from swemill.repo.past_deps import declaration_digest
from swemill.repo.recipe import Recipe
from swemill.repo.sources import ResolvedSource, git

PYPROJECT = """\
[project]
name = "Demo"
version = "{version}"
description = "{words}"
dependencies = [{deps}]
"""


def history(root: Path, versions: list[tuple[str, str]]) -> list[str]:
    """One commit per (version, dependencies); returns the commits, oldest first."""
    root.mkdir(parents=True)
    git(["init", "-q", "-b", "main"], root)
    out = []
    for i, (version, deps) in enumerate(versions):
        (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT.format(
            version=version, words=f"release {i}", deps=deps)))
        git(["add", "-A"], root)
        git(["commit", "-q", "-m", f"v{version}"], root)
        out.append(git(["rev-parse", "HEAD"], root))
    return out


def head_env(root: Path, commit: str) -> tuple[RepoEnv, ResolvedSource]:
    src = ResolvedSource(str(root), root, "demo", commit, "local")
    env = RepoEnv(key=f"demo@{commit[:12]}", path=root / "no-env", repo="demo", commit=commit,
                  source_path=root, recipe=Recipe(), python_version="3.11",
                  base_prefix=root / "no-python")
    return env, src


def test_declarations_not_versions_or_spelling_decide(tmp_path: Path) -> None:
    commits = history(tmp_path / "r", [
        ("1.0", '"Attrs >= 20", "six"'),
        ("1.1", '"six", "attrs>=20"'),  # reordered, respelled, a new version and description
        ("1.2", '"attrs>=22", "six"'),
    ])
    digests = [declaration_digest(tmp_path / "r", c) for c in commits]
    assert digests[0] == digests[1] != digests[2]


def test_commits_are_admitted_in_order_up_to_the_limit(tmp_path: Path) -> None:
    root = tmp_path / "r"
    a, a2, b, c, same_as_head, head = history(root, [
        ("1", '"dep-a"'), ("2", '"dep-a"'), ("3", '"dep-b"'), ("4", '"dep-c"'),
        ("5", '"dep-head"'), ("6", '"dep-head"'),
    ])
    env, src = head_env(root, head)
    envs = CommitEnvs(env, src, limit=2)
    assert envs.admit(head) is None and envs.admit(same_as_head) is None
    assert envs.for_commit(same_as_head) is env  # nothing to build: the head's serves it
    first = envs.admit(c)
    assert first is not None and envs.admit(a) is not None
    assert envs.admit(a2) == envs.admit(a)  # the same declarations share one place
    assert envs.admit(c) == first  # admitted once, admitted again
    assert envs.admit(b) is None  # a third set of declarations: past the limit
    assert envs.for_commit(b) is env
    [(key, why)] = envs.notes.items()
    assert key == f"deps-{declaration_digest(root, b)[:12]}" and "over the limit of 2" in why
    assert CommitEnvs(env, src, limit=0).admit(a) is None  # 0: every commit in the head's
    assert envs.admit("f" * 40) is None  # not in the clone: the head's
