"""The synth package's public names are pinned, resolve lazily, and build by name."""

from __future__ import annotations

import subprocess
import sys

import pytest

import swemill.synth as synth
from swemill.core.errors import ConfigError
from swemill.synth.strategy import Strategy, candidate_id, is_test_path


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert sorted(synth.__all__) == sorted([
        "STRATEGIES", "CombineStrategy", "PolicyProblemWriter", "PrMirrorStrategy",
        "ProceduralStrategy", "RepoView", "RowsSource", "RowsStrategy", "Strategy",
        "SynthReport", "ValidatedBug", "load_rows", "make_strategy", "write_problem_statement",
    ])
    for name in synth.__all__:
        assert getattr(synth, name) is not None
    with pytest.raises(AttributeError):
        synth.NoSuchThing  # noqa: B018


def test_importing_synth_does_not_load_libcst() -> None:
    code = "import sys, swemill.synth; print('libcst' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_make_strategy_builds_protocol_instances() -> None:
    proc = synth.make_strategy("procedural", max_per_target=2)
    assert isinstance(proc, Strategy) and proc.name == "procedural"
    assert isinstance(synth.make_strategy("pr-mirror"), Strategy)
    assert isinstance(synth.make_strategy("combine", bugs=[]), Strategy)
    with pytest.raises(ConfigError, match="unknown strategy 'smith'"):
        synth.make_strategy("smith")
    with pytest.raises(ConfigError, match="combine"):
        synth.make_strategy("combine")


def test_candidate_ids_are_stable_and_test_paths_recognised() -> None:
    assert candidate_id("procedural", "a.py", "f", "k", "p") == candidate_id(
        "procedural", "a.py", "f", "k", "p")
    assert candidate_id("procedural", "a.py", "f", "k", "p") != candidate_id(
        "procedural", "a.py", "f", "k", "q")
    assert candidate_id("procedural", "x").startswith("procedural-")
    for path in ("tests/x.py", "pkg/tests/util.py", "test_a.py", "pkg/a_test.py",
                 "conftest.py"):
        assert is_test_path(path), path
    # A package's own ``testing`` helpers are library code (swemill.suite is one).
    for path in ("pkg/a.py", "pkg/contest.py", "testify/a.py", "pkg/latest.py",
                 "src/pkg/testing/runner.py"):
        assert not is_test_path(path), path
