"""The procedural strategy on a real git working copy: aim, caps, determinism, valid patches."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from swemill.core.records import Baseline
from swemill.synth.patches import apply_patch
from swemill.synth.procedural import ProceduralStrategy
from swemill.synth.strategy import RepoView

LIB = '''"""A small library with something for every mutator."""

import math


def clamp(x, lo=0, hi=10):
    if x < lo:
        return lo
    if x > hi:
        return hi
    else:
        return x


def mean(xs):
    total = 0
    for x in xs:
        total += x
    return total / len(xs)


def words(text):
    try:
        parts = text.strip().lower().split()
    except AttributeError:
        parts = []
    return [p for p in parts if p != "and"]


def hyp(a, b):
    return math.sqrt(a * a + b * b) - 0.0


class Base:
    kind = "base"


class Counter(Base):
    def __init__(self):
        self.n = 0

    def bump(self, by=1):
        with open("/dev/null") as fh:
            fh.read()
        self.n += by
        return self

    def value(self):
        return self.n
'''

TESTS = '''from pkg.lib import clamp, mean


def test_clamp():
    assert clamp(20) == 10


def test_mean():
    assert mean([1, 2, 3]) == 2
'''


@pytest.fixture
def repo(git_repo) -> Path:
    root, commit = git_repo
    commit({
        "pkg/__init__.py": "",
        "pkg/lib.py": LIB,
        "pkg/test_helpers.py": "def helper():\n    return 1\n",
        "pkg/thing_test.py": "def t():\n    return 1\n",
        "tests/conftest.py": "X = 1\n",
        "tests/test_lib.py": TESTS,
        "conftest.py": "def fixture_like():\n    return 2\n",
        "setup.py": "def setup_like():\n    return 3\n",
    }, "base")
    return root


def view(root: Path, seed: int = 0, baseline: Baseline | None = None, limit: int | None = None):
    return RepoView(root=root, repo="example/lib", commit="HEAD", baseline=baseline, seed=seed,
                    max_candidates=limit)


def test_every_candidate_applies_compiles_and_reverses(repo: Path, tmp_path: Path) -> None:
    strat = ProceduralStrategy()
    cands = list(strat.candidates(view(repo)))
    assert len(cands) >= 30
    assert strat.report.yielded == len(cands) and strat.report.reason is None
    assert len({c.candidate_id for c in cands}) == len(cands)
    kinds = Counter(c.metadata["mutator"] for c in cands)
    assert set(kinds) == {
        "remove_assignment", "remove_conditional", "remove_loop", "remove_wrapper",
        "invert_if_else", "shuffle_lines", "change_operator", "change_constant",
        "swap_operands", "break_call_chain", "remove_class_base", "remove_method",
        "shuffle_methods",
    }
    work = tmp_path / "work"
    for c in cands:
        assert [s.file for s in c.changed] == ["pkg/lib.py"]  # never a test or setup file
        assert c.scope == ("module" if c.metadata["mutator"] in
                           ("remove_class_base", "remove_method", "shuffle_methods") else "body")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(repo, work)
        apply_patch(work, c.bug_patch)  # git apply, for real
        broken = (work / "pkg/lib.py").read_text()
        compile(ast.parse(broken), "lib.py", "exec")
        assert ast.dump(ast.parse(broken)) != ast.dump(ast.parse(LIB))
        assert c.golden_patch is not None
        apply_patch(work, c.golden_patch)
        assert (work / "pkg/lib.py").read_text() == LIB


def test_same_seed_same_candidates_other_seed_other_order(repo: Path) -> None:
    def run(seed: int) -> list[tuple[str, str]]:
        return [(c.candidate_id, c.bug_patch)
                for c in ProceduralStrategy().candidates(view(repo, seed))]

    first = run(7)
    assert first == run(7)
    other = run(8)
    assert other != first
    assert len({cid for cid, _ in first} & {cid for cid, _ in other}) > len(first) // 2


def test_round_robin_spreads_over_targets_and_caps_hold(repo: Path) -> None:
    strat = ProceduralStrategy(max_per_target=2)
    cands = list(strat.candidates(view(repo, limit=9)))
    assert len(cands) == 9
    targets = [c.changed[0].qualname for c in cands]
    # clamp, mean, words, hyp, and the methods: the first round visits each before repeating
    assert len(set(targets[:6])) == 6
    everything = list(ProceduralStrategy(max_per_target=2).candidates(view(repo)))
    per = Counter((c.metadata["mutator"] in ("remove_method",), c.changed[0].qualname)
                  for c in everything if c.scope == "body")
    assert max(per.values()) <= 2


def test_coverage_map_aims_at_tested_functions_only(repo: Path) -> None:
    baseline = Baseline(
        repo="example/lib", commit="HEAD", env_key="k", runs=3,
        outcomes={"tests/test_lib.py::test_clamp": "passed",
                  "tests/test_lib.py::test_mean": "failed"},
        durations_s={},
        coverage={
            "pkg/lib.py::clamp": ["tests/test_lib.py::test_clamp"],
            "pkg/lib.py::mean": ["tests/test_lib.py::test_mean"],  # fails at baseline
        },
    )
    strat = ProceduralStrategy()
    cands = list(strat.candidates(view(repo, baseline=baseline)))
    assert cands and {c.changed[0].qualname for c in cands} == {"clamp"}
    assert all(c.fail_to_pass_hint == ["tests/test_lib.py::test_clamp"] for c in cands)
    assert strat.report.skipped["untested_target"] >= 5


def test_equivalent_noop_duplicate_and_uncompilable_mutants_are_skipped(git_repo) -> None:
    root, commit = git_repo
    commit({"m.py": (
        "def dup(xs):\n    xs.append(1)\n    xs.append(1)\n\n\n"
        "def comments(xs):\n    xs.append(1)  # one\n    xs.append(1)  # two\n\n\n"
        "def glob():\n    global X\n    X = 1\n\n\n"
        "def twice(a):\n    a = 1\n    a = 1\n    return a\n"
    )}, "base")
    strat = ProceduralStrategy(kinds=["shuffle_lines"])
    shuffled = list(strat.candidates(view(root)))
    assert [c.changed[0].qualname for c in shuffled] == ["twice"]
    assert strat.report.skipped == Counter({"no_op": 1, "equivalent": 1, "does_not_compile": 1})
    strat = ProceduralStrategy(kinds=["remove_assignment"])
    removed = list(strat.candidates(view(root)))
    assert len(removed) == 2  # glob's X = 1, and one of twice's two identical removals
    assert strat.report.skipped["duplicate"] == 1


def test_nothing_to_mutate_says_why(git_repo, tmp_path: Path) -> None:
    root, commit = git_repo
    commit({"tests/test_only.py": "def test_x():\n    assert True\n", "broken.py": "print 'x'\n"},
           "no library")
    strat = ProceduralStrategy()
    assert list(strat.candidates(view(root))) == []
    assert strat.report.reason == "no python source"
    assert [d.reason for d in strat.report.drops] == ["unparseable_source"]
    assert strat.report.drops[0].item_id == "broken.py"


def test_identical_across_processes_and_hash_seeds(repo: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from swemill.synth.strategy import RepoView\n"
        "from swemill.synth.procedural import ProceduralStrategy\n"
        "v = RepoView(root=Path(sys.argv[1]), repo='example/lib', commit='HEAD', seed=3)\n"
        "for c in ProceduralStrategy().candidates(v): print(c.candidate_id)\n"
    )
    outs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run([sys.executable, "-c", code, str(repo)], env=env,
                              capture_output=True, text=True, check=True)
        outs.append(proc.stdout.split())
    assert outs[0] == outs[1] and len(outs[0]) >= 30
    assert outs[0] == [c.candidate_id for c in ProceduralStrategy().candidates(view(repo, 3))]
