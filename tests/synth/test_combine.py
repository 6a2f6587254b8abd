"""combine: validated bugs of one file merged into one candidate, or refused with a reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from swemill.core.errors import SynthesisError
from swemill.core.records import ChangedSymbol, Golden, Task
from swemill.synth.combine import CombineStrategy, ValidatedBug, merge_edits
from swemill.synth.patches import apply_patch, file_diff, parse_patch
from swemill.synth.strategy import RepoView

LIB = "".join(
    f"def f{i}(x):\n    y = x + {i}\n    return y * 2\n\n\n" for i in range(6)
).rstrip("\n") + "\n"


def bug(i: int, old: str, new: str, base: str, sha: str = "HEAD", text: str = LIB
        ) -> ValidatedBug:
    return ValidatedBug(
        instance_id=f"t{i}",
        bug_patch=file_diff("pkg/lib.py", text, text.replace(old, new, 1)),
        base_commit=sha,
        fail_to_pass=(f"tests/test_lib.py::test_f{i}",),
        pass_to_pass=tuple(f"tests/test_lib.py::test_f{j}" for j in range(6) if j != i),
        changed=(ChangedSymbol(file="pkg/lib.py", qualname=f"f{i}"),),
    )


@pytest.fixture
def repo(git_repo) -> tuple[Path, str]:
    root, commit = git_repo
    sha = commit({"pkg/lib.py": LIB, "pkg/other.py": "z = 1\n"}, "base")
    return root, sha


def view(root: Path, sha: str, seed: int = 0) -> RepoView:
    return RepoView(root=root, repo="example/lib", commit=sha, seed=seed)


def test_merges_distinct_bugs_into_one_multi_candidate(repo, tmp_path: Path) -> None:
    root, sha = repo
    bugs = [bug(i, f"x + {i}", f"x - {i}", LIB, sha) for i in (0, 2, 4)]
    strat = CombineStrategy(bugs, max_k=3)
    cands = list(strat.candidates(view(root, sha)))
    # three bugs: the pairs and the triple, each once
    assert sorted(tuple(c.parents) for c in cands) == [
        ("t0", "t2"), ("t0", "t2", "t4"), ("t0", "t4"), ("t2", "t4")]
    for c in cands:
        assert c.strategy == "combine" and c.scope == "multi"
        assert c.metadata["base_commit"] == sha
        expected = sorted(f"tests/test_lib.py::test_f{p[1:]}" for p in c.parents)
        assert c.fail_to_pass_hint == expected
        assert not set(c.pass_to_pass_hint) & set(c.fail_to_pass_hint)
        assert [s.qualname for s in c.changed] == [f"f{p[1:]}" for p in c.parents]
        work = tmp_path / "w"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(root, work)
        apply_patch(work, c.bug_patch)
        broken = (work / "pkg/lib.py").read_text()
        assert all(f"x - {p[1:]}" in broken for p in c.parents)
        assert broken.count(" - ") == len(c.parents)
        assert c.golden_patch is not None
        apply_patch(work, c.golden_patch)
        assert (work / "pkg/lib.py").read_text() == LIB


def test_merge_is_order_independent_and_refuses_adjacent_edits() -> None:
    a = parse_patch(file_diff("m.py", LIB, LIB.replace("x + 1", "x - 1")))[0]
    b = parse_patch(file_diff("m.py", LIB, LIB.replace("x + 3", "x * 3")))[0]
    assert merge_edits(LIB, [("a", a), ("b", b)]) == merge_edits(LIB, [("b", b), ("a", a)])
    near = LIB.replace("y * 2\n\n\ndef f2", "y\n\n\ndef f2")
    same_fn = parse_patch(file_diff("m.py", LIB, near))
    with pytest.raises(SynthesisError, match="conflict"):
        merge_edits(LIB, [("a", a), ("c", same_fn[0])])


def test_conflicts_and_stale_patches_are_counted(repo) -> None:
    root, sha = repo
    ok = bug(0, "x + 0", "x - 0", LIB, sha)
    clash = bug(1, "y = x + 0\n    return y * 2", "y = x + 0\n    return y", LIB, sha)
    other_base = LIB.replace("x + 5", "x + 50")
    stale = bug(5, "x + 50", "x - 50", LIB, sha, text=other_base)
    strat = CombineStrategy([ok, clash, stale], max_k=2)
    assert list(strat.candidates(view(root, sha))) == []
    assert strat.report.skipped["conflict"] == 1
    assert strat.report.skipped["stale_patch"] == 1  # t5, once, before any combination
    assert {d.reason for d in strat.report.drops} == {"stale_patch"}


def test_nothing_to_combine_says_why(repo) -> None:
    root, sha = repo
    lone = bug(0, "x + 0", "x - 0", LIB, sha)
    elsewhere = ValidatedBug("t9", file_diff("pkg/other.py", "z = 1\n", "z = 2\n"), sha, ("t",))
    strat = CombineStrategy([lone, elsewhere])
    assert list(strat.candidates(view(root, sha))) == []
    assert strat.report.reason == "no two validated bugs share a file and a base commit"
    with pytest.raises(SynthesisError, match="max_k"):
        CombineStrategy([lone], max_k=1)


def test_reads_the_bugs_base_commit_not_the_checkout(repo, git_repo) -> None:
    root, sha = repo
    _, commit = git_repo
    head = commit({"pkg/lib.py": "# moved on\n" + LIB}, "later")
    bugs = [bug(i, f"x + {i}", f"x - {i}", LIB, sha) for i in (1, 3)]
    (cand,) = list(CombineStrategy(bugs).candidates(view(root, head)))
    assert cand.metadata["base_commit"] == sha
    assert cand.bug_patch.count("\n-    y = x + ") == 2


def test_seeded_choice_of_combinations(repo) -> None:
    root, sha = repo
    bugs = [bug(i, f"x + {i}", f"x - {i}", LIB, sha) for i in range(6)]

    def run(seed: int) -> list[list[str]]:
        strat = CombineStrategy(bugs, max_k=3, max_per_file=5)
        return [c.parents for c in strat.candidates(view(root, sha, seed))]

    assert run(1) == run(1) and len(run(1)) == 5
    assert run(1) != run(2)


def test_from_task_pairs_task_and_golden() -> None:
    task = Task(instance_id="i1", repo="r", base_commit="abc", problem_statement="p",
                FAIL_TO_PASS=["a"], PASS_TO_PASS=["b"], test_cmd="pytest", strategy="procedural",
                license_tier="redistributable", env_recipe="e", snapshot="s")
    golden = Golden(instance_id="i1", bug_patch="PATCH", golden_patch="G")
    vb = ValidatedBug.from_task(task, golden)
    assert (vb.bug_patch, vb.base_commit, vb.fail_to_pass, vb.pass_to_pass) == (
        "PATCH", "abc", ("a",), ("b",))
    with pytest.raises(SynthesisError, match="paired with golden"):
        ValidatedBug.from_task(task, golden.model_copy(update={"instance_id": "i2"}))
