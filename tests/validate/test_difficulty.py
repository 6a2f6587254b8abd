"""Difficulty from first principles: pass@k against counting, failure messages by level,
the proxy and solve-rate thresholds at their edges."""

from __future__ import annotations

from itertools import combinations

import pytest

from swemill.core.records import Task
from swemill.synth.leaks import LeakCheck
from swemill.validate.difficulty import (
    SolveStats,
    difficulty_rows,
    informativeness,
    message_level,
    pass_at_k,
    proxies_of,
    proxy_label,
    proxy_points,
    solve_label,
)


def _counted(n: int, c: int, k: int) -> float:
    """pass@k as its definition: the share of k-subsets of the n samples with a success."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_at_k_is_the_share_of_k_subsets_with_a_success(n: int) -> None:
    for c in range(n + 1):
        assert pass_at_k(n, c) == pytest.approx([_counted(n, c, k) for k in range(1, n + 1)],
                                                abs=1e-6)
    assert pass_at_k(4, 1)[0] == 0.25 and pass_at_k(4, 0) == [0.0] * 4
    with pytest.raises(ValueError):
        pass_at_k(2, 3)


BUG = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,4 +1,3 @@\n def mean(xs):\n"
       "-    total = sum(xs)\n-    count = len(xs)\n+    count = len(xs) - 1\n"
       "     return total / count\n")


@pytest.mark.parametrize("message,level", [
    ("", 0),
    ("AssertionError", 0),
    ("E       assert False", 0),
    ("Failed: DID NOT RAISE <class 'ValueError'>", 1),
    ("ValueError: month must be in 1..12", 1),
    ("E       assert 3 == 2\nE        +  where 3 = mean([1, 3])", 2),
    ("AssertionError: expected 2, got 3", 2),
    ("E   NameError: name 'total' is not defined", 3),
    ("UnboundLocalError: cannot access local variable 'x'", 3),
    ("E   AttributeError: object has no attribute 'count'", 1),
])
def test_message_levels(message: str, level: int) -> None:
    assert message_level(message) == level


def test_a_message_quoting_the_edit_points_at_it() -> None:
    check = LeakCheck.of(BUG, known=["def mean(xs):\n    return total / count\n"])
    assert check.lines  # 'count = len(xs) - 1' is long enough to count
    assert message_level("E   assert count = len(xs) - 1 is wrong", check) == 3
    assert message_level("E   assert 2.0 == 3.0", check) == 2
    assert informativeness(["", "E   assert 2.0 == 3.0"]) == pytest.approx(1 / 3, abs=1e-4)
    assert informativeness([]) is None


def test_proxy_points_and_labels_at_their_thresholds() -> None:
    assert proxy_points(2, 5, 2 / 3, "procedural") == 0
    assert proxy_points(3, 4, 0.5, "procedural") == 3
    assert proxy_points(11, 1, 0.1, "combine") == 8
    assert proxy_points(10, 2, None, "rows") == 4  # unknown informativeness and strategy: 1
    assert proxy_points(0, 9, 1.0, "something-new") == 1
    assert [proxy_label(p) for p in range(9)] == ["easy"] * 3 + ["medium"] * 2 + ["hard"] * 4
    assert [solve_label(r) for r in (1.0, 0.8, 0.79, 0.2, 0.19, 0.0)] == [
        "easy", "easy", "medium", "medium", "hard", "hard"]


def test_proxies_of_a_patch_and_its_messages() -> None:
    p = proxies_of(BUG, "procedural", ["t.py::a", "t.py::b"],
                   {"t.py::a": "E   assert 1.5 == 2.0", "t.py::b": ""})
    assert p == {"lines_changed": 3, "n_fail_to_pass": 2, "informativeness": pytest.approx(1 / 3,
                 abs=1e-4), "strategy": "procedural", "points": 1 + 1 + 1 + 0, "label": "medium"}
    assert proxies_of(BUG, "procedural", ["t.py::a"])["informativeness"] is None


def _task(i: int, strategy: str = "procedural", **meta: object) -> Task:
    return Task(instance_id=f"r.{i}", repo="r", base_commit="c", problem_statement="p",
                FAIL_TO_PASS=["t.py::a"], PASS_TO_PASS=[], test_cmd="pytest", strategy=strategy,
                license_tier="unknown", env_recipe="e", snapshot="s", metadata=dict(meta))


def test_rows_take_the_solve_rate_where_measured_and_the_proxies_elsewhere() -> None:
    stored = proxies_of(BUG, "combine", ["t.py::a"], {"t.py::a": ""})
    assert stored["label"] == "hard"
    tasks = [_task(1, "combine", difficulty=stored), _task(2, "combine", difficulty=stored),
             _task(3, "combine", difficulty=stored)]
    rows = difficulty_rows(tasks, {}, {"r.1": SolveStats(4, 4, "oracle"),
                                       "r.2": SolveStats(0, 0, "scripted:submit")})
    one, two, three = rows
    assert (one.label, one.label_source, one.solve_rate, one.pass_at_k) == (
        "easy", "rollouts", 1.0, [1.0] * 4)
    assert one.proxy_label == "hard" and one.lines_changed == 3
    # rolled out but nothing graded: the policy is recorded, the label stays the proxies'
    assert (two.label, two.label_source, two.solve_rate, two.policy) == (
        "hard", "proxies", None, "scripted:submit")
    assert (three.label, three.label_source, three.samples) == ("hard", "proxies", 0)
