"""A hostile git configuration in the user's HOME (and stray ``GIT_*`` variables) changes
nothing swemill's git calls do: same commits, same diffs, no hook, pager, external diff or
signing program run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from swemill.core.git import run_git
from swemill.repo.sources import git_commit_all
from swemill.synth.patches import check_patch
from swemill.synth.strategy import git as synth_git
from swemill.validate.scrub import fresh_commit

PATCH = """diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f(x):
-    return x + 1
+    return x + 2
"""


def _hostile_home(root: Path) -> tuple[Path, Path]:
    """A HOME whose .gitconfig tries everything; every program it names leaves a mark."""
    home, marks, hooks = root / "home", root / "marks", root / "hooks"
    for d in (home, marks, hooks):
        d.mkdir()
    for name in ("pre-commit", "post-commit", "commit-msg"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {marks}/hook-{name}\n")
        hook.chmod(0o755)
    prog = root / "evil.sh"
    prog.write_text(f'#!/bin/sh\ntouch {marks}/"$(basename "$0")-$$"\nexit 1\n')
    prog.chmod(0o755)
    (home / ".gitconfig").write_text(f"""\
[user]
    name = Hostile
    email = hostile@example.invalid
[alias]
    status = !touch {marks}/alias
    apply = !touch {marks}/alias-apply
[core]
    hooksPath = {hooks}
    pager = touch {marks}/pager; cat
    quotepath = true
    autocrlf = true
    fsmonitor = {prog}
[diff]
    external = {prog}
[commit]
    gpgsign = true
[gpg]
    program = {prog}
[color]
    ui = always
[init]
    defaultBranch = hostile
""")
    return home, marks


def _observe(root: Path) -> dict[str, str]:
    """What swemill's git calls make of one small tree."""
    tree = root / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("def f(x):\n    return x + 1\n")
    (tree / "pkg" / "données.txt").write_text("a\r\nb\n")
    head = git_commit_all(tree, "base")
    (tree / "pkg" / "mod.py").write_text("def f(x):\n    return x + 2\n")
    out = {
        "head": head,
        "branch": synth_git(tree, "rev-parse", "--abbrev-ref", "HEAD"),
        "diff": synth_git(tree, "diff"),
        "log": run_git(["log", "-1", "--format=%an <%ae> %ad"], tree).stdout,
        "files": run_git(["ls-files"], tree).stdout,
    }
    (tree / "pkg" / "mod.py").write_text("def f(x):\n    return x + 1\n")
    out["apply"] = str(check_patch(tree, PATCH))
    fresh = root / "fresh"
    fresh.mkdir()
    (fresh / "a.py").write_text("x = 1\n")
    out["fresh"] = fresh_commit(fresh)
    return out


def test_hostile_global_config_changes_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "clean").mkdir()
    clean_home = tmp_path / "clean" / "home"
    clean_home.mkdir()
    monkeypatch.setenv("HOME", str(clean_home))
    want = _observe(tmp_path / "clean")

    (tmp_path / "hostile").mkdir()
    home, marks = _hostile_home(tmp_path / "hostile")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "nowhere" / "index"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", str(tmp_path / "hostile" / "evil.sh"))
    # the configuration is live: plain git reads it
    plain = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True,
                           env={**os.environ}, check=False)
    assert plain.stdout.strip() == "Hostile"

    got = _observe(tmp_path / "hostile")
    assert got == want
    assert got["apply"] == "None" and got["branch"].strip() == "main"
    assert "\x1b[" not in got["diff"] and "données.txt" in got["files"]
    assert got["log"].startswith("swemill <swemill@localhost>")
    assert sorted(p.name for p in marks.iterdir()) == []
