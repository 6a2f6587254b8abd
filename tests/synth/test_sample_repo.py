"""procedural on the bundled sample repository: every applicable mutator kind yields."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from swemill.synth.mutators import MUTATORS
from swemill.synth.patches import check_patch
from swemill.synth.pr_mirror import PrMirrorStrategy
from swemill.synth.procedural import ProceduralStrategy, find_targets
from swemill.synth.strategy import RepoView, python_sources


def _sample_tree(dest: Path, git) -> Path:
    sample = pytest.importorskip("swemill.repo.sample", reason="bundled sample not landed yet")
    if hasattr(sample, "materialize_sample"):
        out = sample.materialize_sample(dest)
        root = Path(out) if out else dest
    elif hasattr(sample, "sample_path"):
        shutil.copytree(sample.sample_path(), dest)
        root = dest
    else:
        pytest.skip("the bundled sample exposes neither materialize_sample nor sample_path yet")
    if not (root / ".git").exists():
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "sample")
    return root


@pytest.mark.slow  # ~250 real `git apply --check` runs
def test_every_applicable_kind_yields_on_the_sample(tmp_path: Path, git) -> None:
    root = _sample_tree(tmp_path / "sample", git)
    applicable = set()
    for rel in python_sources(root):
        module = cst.parse_module((root / rel).read_text())
        for t in find_targets(rel, module):
            for kind, m in MUTATORS.items():
                node = t.node if m.level == "class" else t.node.body
                if m.level == t.level and m.count(node):
                    applicable.add(kind)
    strat = ProceduralStrategy()
    cands = list(strat.candidates(RepoView(root=root, repo="swemill/sample", commit="HEAD")))
    kinds = Counter(c.metadata["mutator"] for c in cands)
    assert len(applicable) >= 10
    assert set(kinds) == applicable, applicable - set(kinds)
    assert len(cands) >= 100
    assert all(check_patch(root, c.bug_patch) is None for c in cands)
    assert not any(c.changed[0].file.startswith("tests/") for c in cands)


def test_pr_mirror_on_the_sample_history(tmp_path: Path) -> None:
    sample = pytest.importorskip("swemill.repo.sample", reason="bundled sample not landed yet")
    if not hasattr(sample, "materialize_sample"):
        pytest.skip("the bundled sample cannot be materialised with history yet")
    root = sample.materialize_sample(tmp_path / "sample", history=True)
    strat = PrMirrorStrategy()
    cands = list(strat.candidates(RepoView(root=root, repo="swemill/sample", commit="HEAD")))
    assert cands, strat.report
    for c in cands:
        assert c.fail_to_pass_hint and c.changed
        work = tmp_path / "w"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(root, work)
        subprocess.run(["git", "checkout", "-q", c.metadata["base_commit"]], cwd=work,
                       check=True, capture_output=True)
        assert check_patch(work, c.bug_patch) is None
