"""The pure parts of grading: the grade from a judged report, the grading tree, lint, admission."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swemill.agent.actions import number_lines
from swemill.agent.admission import admit
from swemill.agent.carry import build_grading_tree, is_test_input, runner_modules
from swemill.agent.grading import RewardWeights, grade_run
from swemill.agent.lint import lint_introduced, ruff_path
from swemill.agent.tree import tree_changes
from swemill.core.records import Outcome, Task, TestResult, Trajectory
from swemill.policies.scripted import strip_line_numbers
from swemill.repo.runner_code import (
    runner_packages,
    runner_top,
    suite_plugin_files,
    tree_plugins,
)
from swemill.suite.verdict import TestRunReport

TASK = Task(instance_id="t1", repo="r", base_commit="c", problem_statement="p",
            FAIL_TO_PASS=["t.py::a", "t.py::b"], PASS_TO_PASS=["t.py::c"], test_cmd="pytest",
            strategy="procedural", license_tier="redistributable", env_recipe="e", snapshot="s")


def _report(outcomes: dict[str, str], exit_code: int = 1, trusted: bool = True) -> TestRunReport:
    results = {k: TestResult(nodeid=k, outcome=v) for k, v in outcomes.items()}  # type: ignore[arg-type]
    return TestRunReport(results=results, exit_code=exit_code, trustworthy=trusted,
                         problem="" if trusted else "pytest never finished its session")


def test_grade_is_the_masked_fraction_of_fail_to_pass() -> None:
    out = grade_run(TASK, _report({"t.py::a": "passed", "t.py::b": "failed",
                                   "t.py::c": "passed"}), not_carried=[])
    assert out.grade == 0.5 and not out.resolved and not out.regression
    assert out.fail_to_pass == {"t.py::a": "passed", "t.py::b": "failed"}
    assert "FAILED   t.py::b" in out.log
    assert "not carried from the workspace (graded as in the pristine snapshot): nothing" \
        in out.log


def test_a_regression_zeroes_the_grade_unless_the_policy_keeps_it() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "failed"})
    zero = grade_run(TASK, report, not_carried=["tests/t.py (test code or configuration)"])
    assert zero.grade == 0.0 and zero.regression and not zero.resolved
    assert zero.signals["f2p_fraction"] == 1.0
    keep = grade_run(TASK, report, not_carried=[], regression="keep")
    assert keep.grade == 1.0 and keep.regression and not keep.resolved


def test_an_untrustworthy_run_earns_nothing_whatever_it_claims() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "passed"},
                     exit_code=0, trusted=False)
    out = grade_run(TASK, report, not_carried=[])
    assert out.grade == 0.0 and not out.resolved
    assert set(out.fail_to_pass.values()) == {"error"}  # nothing from an untrusted report


def test_composite_reward_uses_the_weights_and_leaves_the_grade_alone() -> None:
    report = _report({"t.py::a": "passed", "t.py::b": "passed", "t.py::c": "passed"}, 0)
    w = RewardWeights(diff=0.1, turns=0.01, tokens=0.001, lint=0.05)
    out = grade_run(TASK, report, not_carried=[], weights=w,
                    signals={"diff_lines": 200, "turns": 10, "tokens": 5000, "lint_new": 2})
    assert out.grade == 1.0
    assert out.signals["reward"] == pytest.approx(1.0 - 0.2 - 0.1 - 0.005 - 0.1)


def _traj(outcome: Outcome | None, flags: list[str] | None = None) -> Trajectory:
    return Trajectory(trajectory_id="x", source="rollout", policy="p", outcome=outcome,
                      flags=flags or [])


def test_admission() -> None:
    full = Outcome(grade=1.0, resolved=True, signals={"f2p_fraction": 1.0})
    part = Outcome(grade=0.5, resolved=False, signals={"f2p_fraction": 0.5})
    near = Outcome(grade=0.0, resolved=False, regression=True, signals={"f2p_fraction": 1.0})
    none = Outcome(grade=0.0, resolved=False, signals={"f2p_fraction": 0.0})
    assert admit(_traj(full)) == "sft"
    assert admit(_traj(full, ["edit_tests"])) == "withheld"
    assert admit(_traj(part)) == "preference" and admit(_traj(near)) == "preference"
    assert admit(_traj(none)) == "withheld" and admit(_traj(None)) == "withheld"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_grading_tree_carries_only_non_test_source(tmp_path: Path) -> None:
    pristine, ws, dest = tmp_path / "pristine", tmp_path / "ws", tmp_path / "dest"
    base = {"pkg/mod.py": "x = 1\n", "pkg/gone.py": "y = 1\n", "tests/test_mod.py": "assert x\n",
            "tests/conftest.py": "", "pyproject.toml": "[tool.pytest.ini_options]\n"}
    _write(pristine, base)
    (pristine / "pkg/__pycache__").mkdir()
    (pristine / "pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"stale")
    _write(ws, {**base, "pkg/mod.py": "x = 2\n", "pkg/new.py": "z = 3\n",
                "tests/test_mod.py": "assert True\n", "conftest.py": "force = 1\n",
                "pkg/evil.pth": "import os\n", "sitecustomize.py": "", ".pytest.ini": "[pytest]\n",
                "pytest.py": "fake\n", "json/__init__.py": "fake\n", "plugin.py": "ok = 1\n",
                "pyproject.toml": "[tool.pytest.ini_options]\naddopts='-p plugin'\n",
                "evil-0.dist-info/entry_points.txt": "[pytest11]\nevil = plugin\n",
                "tests/__pycache__/test_mod.cpython-311-pytest-9.2.0.pyc": "cached\n"})
    (ws / "pkg/gone.py").unlink()
    (ws / "tests/conftest.py").unlink()
    (ws / "pkg/blob.py").write_bytes(b"\x00\x01")
    os.symlink("mod.py", ws / "pkg/link.py")
    carried = build_grading_tree(pristine, ws, dest, shadowed=runner_modules())
    assert carried.applied == ["pkg/gone.py", "pkg/mod.py", "pkg/new.py", "plugin.py"]
    assert carried.dropped == {
        ".pytest.ini": "hidden path", "conftest.py": "test code or configuration",
        "evil-0.dist-info/entry_points.txt": "package metadata",
        "json/__init__.py": "shadows a module the test run imports",
        "pkg/__pycache__/mod.cpython-311.pyc": "bytecode or cache",  # absent in ws: kept out
        "pkg/blob.py": "binary", "pkg/evil.pth": "test code or configuration",
        "pkg/link.py": "symbolic link", "pyproject.toml": "test code or configuration",
        "pytest.py": "shadows a module the test run imports",
        "sitecustomize.py": "test code or configuration",
        "tests/__pycache__/test_mod.cpython-311-pytest-9.2.0.pyc": "bytecode or cache",
        "tests/conftest.py": "test code or configuration",
        "tests/test_mod.py": "test code or configuration",
    }
    # the pristine tree plus the fix, without the snapshot's own bytecode
    assert tree_changes(pristine, dest).paths == [
        "pkg/__pycache__/mod.cpython-311.pyc", "pkg/gone.py", "pkg/mod.py", "pkg/new.py",
        "plugin.py"]
    assert (dest / "pkg/mod.py").read_text() == "x = 2\n" and not (dest / "pkg/gone.py").exists()
    assert (dest / "tests/conftest.py").exists() and not (dest / "pkg/__pycache__").exists()
    assert (pristine / "pkg/mod.py").read_text() == "x = 1\n"  # the pristine copy is untouched


def test_the_grading_tree_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    pristine, ws, dest, outside = (tmp_path / n for n in ("pristine", "ws", "dest", "outside"))
    _write(pristine, {"pkg/a.py": "real\n"})
    _write(outside, {"a.py": "host file\n"})
    ws.mkdir()
    os.symlink(outside, ws / "pkg")  # the policy replaced pkg/ by a link to the host
    carried = build_grading_tree(pristine, ws, dest)
    assert carried.dropped == {"pkg": "symbolic link", "pkg/a.py": "behind a symbolic link"}
    assert (outside / "a.py").read_text() == "host file\n"
    assert not (dest / "pkg").is_symlink() and (dest / "pkg/a.py").read_text() == "real\n"


def test_the_test_runners_own_code_is_never_carried(tmp_path: Path) -> None:
    # in a tree that holds pluggy, pytest runs every hook through the tree's copy: an edit to
    # its hook caller (seen on pluggy 1.5.0) turned every report into a pass
    pristine, ws, dest = (tmp_path / n for n in ("pristine", "ws", "dest"))
    base = {"src/pluggy/__init__.py": "", "src/pluggy/_callers.py": "def call():\n    pass\n",
            "src/py.py": "", "src/pkg/mod.py": "x = 1\n", "_pytest/runner.py": "r = 1\n"}
    _write(pristine, base)
    _write(ws, {**base, "src/pluggy/_callers.py": "def call():\n    forged = 1\n",
                "src/pluggy/_new.py": "n = 1\n", "src/py.py": "p = 1\n",
                "_pytest/runner.py": "r = 2\n", "src/pkg/mod.py": "x = 2\n",
                "src/pytestish/a.py": "ok = 1\n"})
    carried = build_grading_tree(pristine, ws, dest, shadowed=runner_modules())
    assert carried.applied == ["src/pkg/mod.py", "src/pytestish/a.py"]
    assert carried.dropped == {rel: "the test runner's own code" for rel in (
        "_pytest/runner.py", "src/pluggy/_callers.py", "src/pluggy/_new.py", "src/py.py")}
    assert (dest / "src/pluggy/_callers.py").read_text() == "def call():\n    pass\n"
    assert not (dest / "src/pluggy/_new.py").exists()


def test_runner_paths_and_packages(tmp_path: Path) -> None:
    assert [runner_top(p) for p in ("src/pluggy/_callers.py", "pluggy/x.py", "src/py.py",
                                    "py.py", "_pytest/a/b.py", "src/iniconfig/__init__.py",
                                    "src/pkg/pluggy.py", "docs/pytest.md", "pytest_x/a.py",
                                    "src", "py.typed")] == [
        "pluggy", "pluggy", "py", "py", "_pytest", "iniconfig", None, None, None, None, None]
    _write(tmp_path, {"src/_pytest/__init__.py": "", "src/pytest/__init__.py": "",
                      "src/py.py": "", "pluggy/README": "not a package\n", "pkg/__init__.py": ""})
    assert runner_packages(tmp_path) == ["src/_pytest", "src/py.py", "src/pytest"]
    assert runner_packages(tmp_path / "pkg") == []


def test_modules_a_conftest_loads_as_plugins(tmp_path: Path) -> None:
    _write(tmp_path, {
        "conftest.py": "import os\npytest_plugins = ['pkg.fixtures', 'pytester']\n",
        "tests/conftest.py": "pytest_plugins: tuple = ('helpers', 'tests.more')\n"
                             "pytest_plugins += ['src_mod']\n",
        "tests/helpers.py": "", "tests/more.py": "",
        "src/src_mod.py": "", "pkg/__init__.py": "", "pkg/fixtures/__init__.py": "",
        "docs/conftest.py": "pytest_plugins = 'pkg.missing'\nname = 'x'\n"
                            "pytest_plugins = [name]\n",
        ".tox/py/conftest.py": "pytest_plugins = ['pkg']\n",
        "bad/conftest.py": "pytest_plugins = [\n"})
    assert suite_plugin_files(tmp_path) == [
        "pkg/fixtures/__init__.py", "src/src_mod.py", "tests/helpers.py", "tests/more.py"]
    # the pytest configuration's addopts load a plugin every run keeps (a dropped one, or a
    # "no:" one, loads nothing)
    _write(tmp_path, {"pkg/hooks.py": "", "pytest.ini": (
        "[pytest]\naddopts = -p pkg.hooks -pno:cacheprovider -p xdist --strict-markers\n")})
    assert "pkg/hooks.py" in suite_plugin_files(tmp_path)


def test_a_module_a_conftest_loads_as_a_plugin_is_never_carried(tmp_path: Path) -> None:
    # a helper module registered through pytest_plugins can empty every item's runtest from
    # pytest_collection_modifyitems: under the guard a failing test then passed
    pristine, ws, dest = (tmp_path / n for n in ("pristine", "ws", "dest"))
    base = {"conftest.py": "pytest_plugins = ['pkg.fixtures']\n", "pkg/__init__.py": "",
            "pkg/fixtures.py": "import pytest\n", "pkg/core.py": "x = 1\n"}
    _write(pristine, base)
    _write(ws, {**base, "pkg/core.py": "x = 2\n", "pkg/fixtures.py": (
        "def pytest_collection_modifyitems(items):\n    for item in items:\n"
        "        item.runtest = lambda: None\n")})
    carried = build_grading_tree(pristine, ws, dest)
    assert carried.applied == ["pkg/core.py"]
    assert carried.dropped == {"pkg/fixtures.py": "a pytest plugin the suite's conftest loads"}
    assert (dest / "pkg/fixtures.py").read_text() == "import pytest\n"


def test_plugins_the_env_loads_from_the_tree(tmp_path: Path) -> None:
    site, tree = tmp_path / "site", tmp_path / "tree"
    _write(site, {
        "own-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: own\nVersion: 1.0\n",
        "own-1.0.dist-info/entry_points.txt": "[pytest11]\nown = own.plugin\n",
        "dep-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: dep\nVersion: 2.0\n",
        "dep-2.0.dist-info/entry_points.txt": "[pytest11]\ndep = dep_plugin\n"
                                              "[console_scripts]\nown = own.cli:main\n"})
    _write(tree, {"src/own/__init__.py": "", "src/own/plugin.py": "", "tests/test_x.py": ""})
    assert tree_plugins(tree, [site]) == ["own (src/own/plugin.py)"]
    _write(tree, {"dep_plugin/__init__.py": ""})  # a tree holding the dependency's module too
    assert tree_plugins(tree, [site]) == ["dep (dep_plugin/__init__.py)", "own (src/own/plugin.py)"]
    assert tree_plugins(tree / "tests", [site]) == []


def test_test_inputs() -> None:
    assert is_test_input("tests/data/input.json") and is_test_input("pkg/test_x.py")
    assert is_test_input("setup.cfg") and is_test_input("a/b/x.pth")
    assert is_test_input("pytest.toml") and is_test_input("pkg/testing/helpers.py")
    assert not is_test_input("pkg/testing_utils.py") and not is_test_input("pkg/core.py")


def test_tree_changes_counts_lines_and_reads_links_not_their_targets(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, {"m.py": "one\ntwo\n"})
    _write(b, {"m.py": "one\nthree\nfour\n", "new.txt": "n\n"})
    os.symlink("/etc", b / "etc")
    ch = tree_changes(a, b)
    assert ch.paths == ["etc", "m.py", "new.txt"]
    assert (ch.lines_added, ch.lines_removed) == (3, 1)
    assert ch.added["m.py"] == "three\nfour\n" and "+++ b/m.py" in ch.diff


@pytest.mark.skipif(ruff_path() is None, reason="ruff is not installed")
def test_lint_counts_only_findings_the_change_introduced(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, {"m.py": "import os\n\n\ndef f():\n    return 1\n"})
    _write(b, {"m.py": "import os\nimport sys\n\n\ndef f():\n    x = 2\n    return 1\n"})
    assert lint_introduced(a, b, ["m.py"]) == 2  # sys unused, x unused; os was there before
    assert lint_introduced(a, a, ["m.py"]) == 0


@given(st.text(alphabet=st.sampled_from("ab \t\n\r\x0c€"), max_size=60))
def test_numbered_reads_round_trip(text: str) -> None:
    assert strip_line_numbers(number_lines(text)) == text
