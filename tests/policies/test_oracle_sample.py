"""The oracle on realistic bugs: procedural candidates from the bundled sample repository.

Each candidate's bug is applied with ``git apply``; the golden patch is ``git diff -R`` (the
broken tree back to the original). The oracle's calls, run by the small executor of
``test_oracle``, must give back the original tree exactly; a noisy oracle's wrong fix must not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from swemill.policies.scripted import NoisyOraclePolicy, OraclePolicy

from .test_oracle import _rollout, _tree

SAMPLE = Path(__file__).resolve().parents[2] / "src" / "swemill" / "repo" / "sample" / "tree"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SAMPLE.is_dir(), reason="the sample repository is not bundled"),
]


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                         input=stdin, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout


def test_oracle_undoes_procedural_bugs_in_the_sample_repo(tmp_path: Path) -> None:
    from swemill.synth import RepoView, make_strategy

    base = tmp_path / "base"
    shutil.copytree(SAMPLE, base)
    _git(base, "init", "-q")
    _git(base, "add", "-A")
    _git(base, "commit", "-qm", "base")
    commit = _git(base, "rev-parse", "HEAD").strip()
    strategy = make_strategy("procedural")
    view = RepoView(root=base, repo="sample", commit=commit, max_candidates=25)
    candidates = list(strategy.candidates(view))
    assert len(candidates) >= 10
    original = _tree(base)
    wrong = 0
    for i, cand in enumerate(candidates):
        work = tmp_path / f"c{i}"
        shutil.copytree(base, work)
        _git(work, "apply", "-", stdin=cand.bug_patch)
        golden = _git(work, "diff", "-R")
        assert _tree(work) != original
        broken = tmp_path / f"b{i}"
        shutil.copytree(work, broken)
        _rollout(OraclePolicy(golden), work, numbered=bool(i % 2))
        assert _tree(work) == original, cand.candidate_id
        noisy = NoisyOraclePolicy(golden, 0.5, seed=i)
        _rollout(noisy, broken)
        assert (_tree(broken) != original) == noisy.wrong, cand.candidate_id
        wrong += noisy.wrong
    assert 0 < wrong < len(candidates)
