"""pr-mirror on real git histories built here, and on clones with no history to mirror."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from swemill.core.records import Baseline
from swemill.synth.patches import apply_patch
from swemill.synth.pr_mirror import PrMirrorStrategy
from swemill.synth.strategy import RepoView

CALC_V1 = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_V2 = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST_V1 = "from pkg.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_V2 = TEST_V1 + "\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@pytest.fixture
def history(git_repo) -> tuple[Path, dict[str, str]]:
    root, commit = git_repo
    shas = {
        "init": commit({"pkg/__init__.py": "", "pkg/calc.py": CALC_V1,
                        "tests/test_calc.py": TEST_V1, "pyproject.toml": "[project]\n"}, "init"),
        "fix": commit({"pkg/calc.py": CALC_V2, "tests/test_calc.py": TEST_V2}, "fix add"),
        "docs": commit({"README.md": "# calc\n"}, "docs"),
        "untested": commit({"pkg/calc.py": CALC_V2 + "\n\ndef neg(a):\n    return -a\n"},
                           "add neg, no tests"),
        "multi": commit({
            "pkg/text.py": "def shout(s):\n    return s.upper()\n",
            "pkg/calc.py": CALC_V2 + "\n\ndef neg(a):\n    return 0 - a\n",
            "tests/test_text.py": "from pkg.text import shout\n\n\nclass TestShout:\n"
                                  "    def test_upper(self):\n        assert shout('a') == 'A'\n",
            "CHANGES.md": "- shout() added; neg() fixed\n",
            "pyproject.toml": "[project]\nname = 'calc'\n",
        }, "text module"),
    }
    return root, shas


def view(root: Path, baseline: Baseline | None = None, limit: int | None = None) -> RepoView:
    return RepoView(root=root, repo="example/calc", commit="HEAD", baseline=baseline,
                    max_candidates=limit)


def checkout(root: Path, sha: str, dest: Path, git) -> Path:
    git(root.parent, "clone", "-q", str(root), str(dest))
    git(dest, "checkout", "-q", sha)
    return dest


def test_source_and_test_commits_become_candidates(history, tmp_path: Path, git) -> None:
    root, shas = history
    strat = PrMirrorStrategy()
    cands = list(strat.candidates(view(root)))
    assert [c.metadata["base_commit"] for c in cands] == [shas["multi"], shas["fix"]]
    assert strat.report.skipped["no_source_change"] == 1  # docs
    assert strat.report.skipped["not_exercised_by_tests"] == 1  # neg without tests
    multi, fix = cands
    assert fix.scope == "module" and multi.scope == "multi"
    assert [(s.file, s.qualname) for s in fix.changed] == [("pkg/calc.py", "add")]
    assert fix.fail_to_pass_hint == ["tests/test_calc.py::test_add"]
    assert multi.fail_to_pass_hint == ["tests/test_text.py::TestShout::test_upper"]
    assert fix.metadata["parent_commit"] == shas["init"]

    # Base = the commit's tree; bug patch reverts its source only, test changes stay.
    work = checkout(root, shas["fix"], tmp_path / "fix", git)
    apply_patch(work, fix.bug_patch)
    assert (work / "pkg/calc.py").read_text() == CALC_V1
    assert (work / "tests/test_calc.py").read_text() == TEST_V2
    assert fix.golden_patch is not None
    apply_patch(work, fix.golden_patch)
    assert (work / "pkg/calc.py").read_text() == CALC_V2


def test_reverted_files_exclude_build_config_but_include_docs(history, tmp_path, git) -> None:
    root, shas = history
    multi = next(iter(PrMirrorStrategy().candidates(view(root))))
    work = checkout(root, shas["multi"], tmp_path / "multi", git)
    apply_patch(work, multi.bug_patch)
    assert not (work / "pkg/text.py").exists()
    assert not (work / "CHANGES.md").exists()  # a changelog line would give the fix away
    assert (work / "pyproject.toml").read_text() == "[project]\nname = 'calc'\n"
    assert (work / "tests/test_text.py").exists()
    assert "return -a" in (work / "pkg/calc.py").read_text()


def test_coverage_counts_as_exercised(history) -> None:
    root, shas = history
    baseline = Baseline(repo="example/calc", commit="HEAD", env_key="k", runs=1, outcomes={},
                        durations_s={}, coverage={"pkg/calc.py::neg": ["tests/test_neg.py::t"]})
    cands = list(PrMirrorStrategy().candidates(view(root, baseline)))
    by_base = {c.metadata["base_commit"]: c for c in cands}
    assert by_base[shas["untested"]].fail_to_pass_hint == ["tests/test_neg.py::t"]
    assert list(PrMirrorStrategy().candidates(view(root, limit=1)))[0] == cands[0]


def test_shallow_clone_yields_nothing_and_says_why(history, tmp_path: Path) -> None:
    root, _ = history
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(shallow)],
                   check=True, capture_output=True)
    strat = PrMirrorStrategy()
    assert list(strat.candidates(view(shallow))) == []
    assert strat.report.reason is not None and "shallow clone" in strat.report.reason


def test_single_commit_and_non_git_say_why(git_repo, tmp_path: Path) -> None:
    root, commit = git_repo
    commit({"a.py": "x = 1\n", "tests/test_a.py": "def test():\n    pass\n"}, "only")
    strat = PrMirrorStrategy()
    assert list(strat.candidates(view(root))) == []
    assert strat.report.reason is not None and "single-commit" in strat.report.reason
    plain = tmp_path / "plain"
    plain.mkdir()
    assert list(strat.candidates(view(plain))) == []
    assert strat.report.reason is not None and "not a git repository" in strat.report.reason


def test_oversized_and_binary_commits_are_dropped_with_reasons(git_repo) -> None:
    root, commit = git_repo
    commit({"pkg/a.py": "x = 1\n", "tests/test_a.py": "def test():\n    pass\n"}, "init")
    big = commit({"pkg/a.py": "".join(f"v{i} = {i}\n" for i in range(50)),
                  "tests/test_a.py": "def test():\n    assert 1\n"}, "big")
    wide = commit({**{f"pkg/m{i}.py": "y = 1\n" for i in range(4)},
                   "tests/test_a.py": "def test():\n    assert 2\n"}, "wide")
    (root / "pkg/data.bin").write_bytes(b"\x00\x01\x02")
    binary = commit({"pkg/a.py": "x = 2\n", "tests/test_a.py": "def test():\n    assert 3\n"},
                    "binary")
    strat = PrMirrorStrategy(max_source_files=3, max_patch_lines=30)
    assert list(strat.candidates(view(root))) == []
    assert {(d.item_id, d.reason) for d in strat.report.drops} == {
        (big, "patch_too_large"), (wide, "too_many_files"), (binary, "binary_change")}
    assert strat.report.reason == "no commit changes source together with its tests"
