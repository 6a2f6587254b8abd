"""Imported rows, both shapes, materialised from a real clone (and a plain tree)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from swemill.core.errors import SourceError
from swemill.synth.dataset_rows import RowsSource, RowsStrategy, load_rows
from swemill.synth.patches import apply_patch
from swemill.synth.strategy import RepoView

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@pytest.fixture
def clone(git_repo, git) -> tuple[Path, dict[str, str]]:
    """``buggy`` (a SWE-bench base) -> ``fixed`` (a SWE-smith base) -> ``later``."""
    root, commit = git_repo
    buggy = commit({"pkg/__init__.py": "", "pkg/calc.py": BUGGY}, "buggy")
    fixed = commit({"pkg/calc.py": FIXED, "tests/test_calc.py": TEST}, "fix")
    gold = git(root, "diff", buggy, fixed, "--", "pkg/calc.py")
    test_patch = git(root, "diff", buggy, fixed, "--", "tests")
    later = commit({"pkg/calc.py": FIXED + "\n\ndef sub(a, b):\n    return a - b\n"}, "later")
    return root, {"buggy": buggy, "fixed": fixed, "later": later, "gold": gold,
                  "test_patch": test_patch}


def swebench_row(shas: dict[str, str], **over: object) -> dict[str, object]:
    row = {
        "instance_id": "example__calc-1", "repo": "example/calc", "base_commit": shas["buggy"],
        "patch": shas["gold"], "test_patch": shas["test_patch"],
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "PASS_TO_PASS": "[]",
        "problem_statement": "add() subtracts", "version": "1.0", "hints_text": "",
    }
    return {**row, **over}


def swesmith_row(shas: dict[str, str], **over: object) -> dict[str, object]:
    bug = ("diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n"
           "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return a * b\n")
    short = shas["fixed"][:8]
    row = {
        "instance_id": f"example__calc.{short}.func_pm_op_change__abc", "repo":
        f"swesmith/example__calc.{short}", "patch": bug,
        "FAIL_TO_PASS": ["tests/test_calc.py::test_add"], "PASS_TO_PASS": [],
        "image_name": f"swebench/swesmith.x86_64.example__calc.{short}",
        "problem_statement": "",
    }
    return {**row, **over}


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def work_tree(root: Path, sha: str, dest: Path, git) -> Path:
    git(root.parent, "clone", "-q", str(root), str(dest))
    git(dest, "checkout", "-q", sha)
    return dest


def view(root: Path) -> RepoView:
    return RepoView(root=root, repo="example/calc", commit="HEAD")


def test_swebench_row_base_is_the_fixed_state(clone, tmp_path: Path, git) -> None:
    root, shas = clone
    rows = write_jsonl(tmp_path / "rows.jsonl", [swebench_row(shas)])
    strat = RowsStrategy(RowsSource(rows_path=rows, repo_dir=root))
    (cand,) = list(strat.candidates(view(root)))
    assert cand.strategy == "rows" and cand.repo == "example/calc"
    assert cand.metadata["base_commit"] == shas["buggy"]
    assert cand.metadata["row_shape"] == "swebench"
    assert cand.fail_to_pass_hint == ["tests/test_calc.py::test_add"]
    assert cand.golden_patch == shas["gold"]
    assert [(s.file, s.qualname) for s in cand.changed] == [("pkg/calc.py", "add")]
    # base_commit + base_patch = fixed + tests; + bug_patch = SWE-bench's broken state.
    work = work_tree(root, shas["buggy"], tmp_path / "w", git)
    apply_patch(work, cand.metadata["base_patch"])
    assert (work / "pkg/calc.py").read_text() == FIXED
    apply_patch(work, cand.bug_patch)
    assert (work / "pkg/calc.py").read_text() == BUGGY
    assert (work / "tests/test_calc.py").read_text() == TEST


def test_swesmith_row_patch_is_the_bug(clone, tmp_path: Path, git) -> None:
    root, shas = clone
    rows = write_jsonl(tmp_path / "rows.jsonl", [swesmith_row(shas)])
    (cand,) = list(RowsStrategy(RowsSource(rows_path=rows, repo_dir=root)).candidates(view(root)))
    assert cand.repo == "example/calc"
    assert cand.metadata["base_commit"] == shas["fixed"]  # resolved from the short sha
    assert cand.metadata["base_patch"] == ""
    assert cand.metadata["image_name"].endswith(shas["fixed"][:8])
    work = work_tree(root, shas["fixed"], tmp_path / "w", git)
    apply_patch(work, cand.bug_patch)
    assert "a * b" in (work / "pkg/calc.py").read_text()
    assert cand.golden_patch is not None
    apply_patch(work, cand.golden_patch)
    assert (work / "pkg/calc.py").read_text() == FIXED


def test_swesmith_row_from_a_plain_tree(clone, tmp_path: Path, git) -> None:
    root, shas = clone
    tree = work_tree(root, shas["fixed"], tmp_path / "w", git)
    shutil.rmtree(tree / ".git")
    rows = write_jsonl(tmp_path / "rows.jsonl", [swesmith_row(shas)])
    strat = RowsStrategy(RowsSource(rows_path=rows, repo_dir=tree))
    (cand,) = list(strat.candidates(view(tree)))
    assert cand.metadata["base_commit"] == shas["fixed"][:8]
    assert (tree / "pkg/calc.py").read_text() == FIXED  # checking never touched the tree


def test_bad_rows_are_counted_drops(clone, tmp_path: Path) -> None:
    root, shas = clone
    stale = swesmith_row(shas, instance_id="stale", patch=swesmith_row(shas)["patch"]
                         .replace("return a + b", "return a + c"))
    rows = write_jsonl(tmp_path / "rows.jsonl", [
        swebench_row(shas),
        "{not json",
        swebench_row(shas, instance_id="nof2p", FAIL_TO_PASS="[]"),
        swebench_row(shas, instance_id="badjson", PASS_TO_PASS="[oops"),
        {"instance_id": "mystery", "repo": "x/y", "patch": "p", "FAIL_TO_PASS": ["t"]},
        swebench_row(shas, instance_id="gone", base_commit="0" * 40),
        stale,
        swebench_row(shas, instance_id="nobase", base_commit=shas["later"]),
    ])
    strat = RowsStrategy(RowsSource(rows_path=rows, repo_dir=root))
    cands = list(strat.candidates(view(root)))
    assert [c.metadata["source_instance_id"] for c in cands] == ["example__calc-1"]
    reasons = {d.item_id: d.reason for d in strat.report.drops}
    assert reasons == {
        "row 2": "not_an_object",
        "nof2p": "invalid_row",
        "badjson": "invalid_row",
        "mystery": "unknown_shape",
        "gone": "base_commit_not_in_clone",
        "stale": "bug_patch_does_not_apply",
        "nobase": "base_patch_does_not_apply",  # test_patch adds a file that already exists
    }
    assert "FAIL_TO_PASS" in next(d.detail for d in strat.report.drops if d.item_id == "nof2p")


def test_load_rows_reads_json_and_parquet(clone, tmp_path: Path) -> None:
    _, shas = clone
    rows = [swebench_row(shas), swesmith_row(shas)]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    got, drops = load_rows(tmp_path / "rows.json")
    assert [r.shape for r in got] == ["swebench", "swesmith"] and drops == []
    pq.write_table(pa.Table.from_pylist([swesmith_row(shas)]), tmp_path / "rows.parquet")
    got, drops = load_rows(tmp_path / "rows.parquet")
    assert got[0].upstream() == ("example/calc", shas["fixed"][:8])
    forced, _ = load_rows(tmp_path / "rows.json", shape="swesmith")
    assert {r.shape for r in forced} == {"swesmith"}


def test_unreadable_sources_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot read rows"):
        load_rows(tmp_path / "missing.jsonl")
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(SourceError, match="JSON list"):
        load_rows(tmp_path / "x.json")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    with pytest.raises(SourceError, match="cannot read rows"):
        load_rows(tmp_path / "bad.parquet")
    with pytest.raises(SourceError, match="unknown row shape"):
        load_rows(tmp_path / "x.json", shape="other")
