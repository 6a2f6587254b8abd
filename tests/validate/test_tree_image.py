"""The tree image serves a tree the head image cannot, without importing and collecting it
again for every run, and answers as an ordinary run of that tree does.

A module that computes a table at import (``TABLE = table()``) and notes each import of
itself in a file: an edit of ``table`` ran before any fork of the head image, so the head
image refuses it (``ran before the fork``) and, before the tree image, each run of that
broken tree (the first, then the repeats of its newly failing test) imported and collected
it afresh in a fork of the server. The server's tree image imports the edited tree once; its
forks give the outcomes and exit codes of ordinary runs, whole suite and selections alike; a
tree that does not collect cleanly says so (the ordinary run reports its errors); the head
image stays up beside it. Through a worker, a candidate editing ``table`` gets the verdict,
lists and failure messages it gets with the tree image off, and its broken tree is imported
once instead of three times.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.validate.inside_server import ARGS, Server

from swemill.core.records import Candidate, ChangedSymbol
from swemill.repo.envbuild import build_env
from swemill.repo.sources import resolve_source
from swemill.sandbox import Limits
from swemill.suite.baseline import run_baseline
from swemill.synth.patches import file_diff
from swemill.validate.check import CheckContext, Checked, check_candidate, select_tests
from swemill.validate.inside import protocol as wire
from swemill.validate.inside.protocol import Flags
from swemill.validate.worker import Worker, open_base

from .conftest import PYPROJECT, commit_tree

LIB = '''\
def table():
    return {"a": 1, "b": 2}


TABLE = table()

with open("imports.txt", "a") as fh:  # every run's working directory is the tree's root
    fh.write("head\\n" if TABLE["b"] == 2 else "broken\\n")


def lookup(key):
    return TABLE[key]
'''

TESTS = '''\
from {mod} import TABLE, lookup


def test_a():
    assert lookup("a") == 1


def test_b():
    assert lookup("b") == 2


def test_size():
    assert len(TABLE) == 2
'''

BROKEN = LIB.replace('"b": 2}', '"b": 3}', 1)


def _imports(root: Path, kind: str) -> int:
    path = root / "imports.txt"
    return path.read_text().split().count(kind) if path.exists() else 0


def _tree(server: Server, **extra: object) -> dict[str, object]:
    return server.ask(wire.StartImage(server._id(), ARGS, 60, tree=True, **extra))


def test_the_tree_image_answers_as_ordinary_runs_and_imports_the_tree_once(
        tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(LIB)
    (tmp_path / "test_lib.py").write_text(TESTS.format(mod="lib"))
    ids = ["test_lib.py::test_a", "test_lib.py::test_b", "test_lib.py::test_size"]
    server = Server(tmp_path)
    try:
        assert server.start_image(60)["ready"]  # the head image, at head
        (tmp_path / "lib.py").write_text(BROKEN)
        ready = _tree(server)
        assert ready["ready"] and ready["items"] == 3 and ready["collect_errors"] == 0
        assert _imports(tmp_path, "broken") == 1
        served = [server.in_image([], 60, whole=True, tree=True),
                  server.in_image(ids[1:], 60, tree=True, terse=True),
                  server.in_image(ids[1:2], 60, tree=True, terse=True)]
        assert _imports(tmp_path, "broken") == 1  # forks of the image: nothing imported again
        ordinary = [server.run([], 60), server.run(ids[1:], 60, terse=True),
                    server.run(ids[1:2], 60, terse=True)]
        assert _imports(tmp_path, "broken") == 4
        # the head image is still there, and still refuses what it cannot serve exactly
        head = server.in_image(ids[:1], 60, hotpatch=["lib.py"])
    finally:
        server.close()
    for image, plain in zip(served, ordinary, strict=True):
        assert image["unservable"] is None
        assert (image["exit_code"], image["outcomes"]) == (plain["exit_code"], plain["outcomes"])
    assert served[0]["outcomes"] == {ids[0]: "passed", ids[1]: "failed", ids[2]: "passed"}
    assert "assert 3 == 2" in served[0]["messages"][ids[1]]
    assert served[0]["messages"][ids[1]] == ordinary[0]["messages"][ids[1]]
    assert head["unservable"] == "ran before the fork (at import or collection)"


def test_a_tree_that_does_not_collect_cleanly_is_left_to_the_ordinary_run(
        tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(LIB.replace("TABLE = table()", "TABLE = table()[0]"))
    (tmp_path / "test_lib.py").write_text(TESTS.format(mod="lib"))
    server = Server(tmp_path)
    off = Server(tmp_path, flags=Flags.without(["tree_image"]))
    try:
        ready = _tree(server)
        switched_off = _tree(off)
    finally:
        server.close()
        off.close()
    assert ready["ready"] and ready["collect_errors"] == 1 and ready["items"] == 0
    assert not switched_off["ready"] and switched_off["error"] == "tree image switched off"


def _project(root: Path) -> Path:
    files = {"pyproject.toml": PYPROJECT.replace("calcpkg", "tablepkg"),
             "tablepkg/__init__.py": "", "tablepkg/core.py": LIB,
             "tests/test_core.py": TESTS.format(mod="tablepkg.core")}
    commit_tree(root, files, "table")
    return root


def _judgement(c: Checked) -> tuple[object, ...]:
    v = c.verdict
    return v.accepted, v.reason, v.fail_to_pass, v.pass_to_pass, c.messages


@pytest.mark.slow
def test_a_worker_serves_a_broken_tree_that_ran_at_import_from_its_tree_image(
        shared_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEMILL_CACHE", str(shared_cache))
    env = build_env(resolve_source(str(_project(tmp_path / "tablepkg"))))
    baseline = run_baseline(env)
    cand = Candidate(candidate_id="table", repo="tablepkg", strategy="procedural",
                     bug_patch=file_diff("tablepkg/core.py", LIB, BROKEN),
                     changed=[ChangedSymbol(file="tablepkg/core.py", qualname="table")])
    assert "tablepkg/core.py::table" in baseline.shared
    assert select_tests(cand, baseline) is None  # it ran at import: the whole suite
    ctx = CheckContext(baseline, baseline.commit, repeat=3)
    base = open_base(env, backend="auto", limits=Limits(timeout_s=120))
    judged, broken_imports, tree_runs = [], [], []
    try:
        for flags in (Flags(), Flags.without(["tree_image"])):
            worker = Worker(env, base, baseline.commit, prewarm_s=60, flags=flags)
            try:
                judged.append(check_candidate(ctx, worker, cand))
                broken_imports.append(_imports(worker.root, "broken"))
                tree_runs.append(None if worker.tree is None else worker.tree.runs)
            finally:
                worker.close()
    finally:
        base.close()
    on, off = judged
    assert on.verdict.accepted, on.verdict
    assert on.verdict.fail_to_pass == ["tests/test_core.py::test_b"]
    assert _judgement(on) == _judgement(off)
    # the first broken run and its two repeats: one import of the broken tree with the tree
    # image, three without it
    assert tree_runs == [3, None]
    assert broken_imports == [1, 3]
