"""The warm server itself, over its JSON-lines protocol, in a real subprocess: failure
reports from its parse cache are exactly the uncached ones (and follow an edited file), and a
per-test deadline ends a hanging run early while leaving a normal run alone."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.validate.inside_server import Server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    srv = Server(tmp_path)
    try:
        yield srv, tmp_path
    finally:
        srv.close()


def _module(marker: str, pad: int) -> str:
    filler = "".join(f"def helper_{i}(x):\n    if x:\n        return x + {i}\n    return {i}\n\n"
                     for i in range(pad))
    return filler + textwrap.dedent(f"""
        def test_one():
            value = helper_1(0)
            assert value == {marker!r}, (
                "first"
            )


        def test_two():
            assert helper_2(0) == {marker!r}


        def test_ok():
            assert helper_3(1) == 4
        """)


def _line_of(root: Path, marker: str) -> int:
    lines = (root / "test_big.py").read_text().splitlines()
    return lines.index(f"    assert value == {marker!r}, (") + 1


def test_failure_reports_from_the_parse_cache_are_the_uncached_ones(
        server: tuple[Server, Path]) -> None:
    srv, root = server
    (root / "test_big.py").write_text(_module("v1", 400))
    replies = [srv.run(["test_big.py"], 60) for _ in range(3)]
    for reply in replies:
        assert reply["outcomes"] == {"test_big.py::test_one": "failed",
                                     "test_big.py::test_two": "failed",
                                     "test_big.py::test_ok": "passed"}
    # the first child parsed the module, the second did too and handed it to the server,
    # the third used the server's tree: all three wrote the very same report
    assert [r["cached_asts"] for r in replies] == [0, 1, 1]
    assert replies[0]["messages"] == replies[1]["messages"] == replies[2]["messages"]
    first = replies[2]["messages"]["test_big.py::test_one"]
    assert f"test_big.py:{_line_of(root, 'v1')}: in test_one" in first
    assert "assert value == 'v1', (" in first and "AssertionError: first" in first

    # the file changes under the same name (lines shift): the report follows the new text
    (root / "test_big.py").write_text("# one more line\n" + _module("v2", 401))
    again = srv.run(["test_big.py"], 60)
    message = again["messages"]["test_big.py::test_one"]
    assert f"test_big.py:{_line_of(root, 'v2')}: in test_one" in message
    assert "assert value == 'v2', (" in message and "v1" not in message
    assert again["outcomes"]["test_big.py::test_two"] == "failed"


def test_a_test_past_its_deadline_ends_the_run_early(server: tuple[Server, Path]) -> None:
    srv, root = server
    (root / "test_hang.py").write_text(textwrap.dedent("""
        import time

        def test_quick():
            time.sleep(0.3)

        def test_hangs():
            while True:
                pass
        """))
    quick, hangs = "test_hang.py::test_quick", "test_hang.py::test_hangs"
    reply = srv.run([quick, hangs], 60, deadlines={quick: 5.0, hangs: 1.0})
    assert reply["timed_out"] is True
    assert reply["hung"] == hangs
    assert reply["wall_s"] < 20  # the deadline, not the run's 60 s budget, ended it

    # a test slower than nothing but within its deadline is not disturbed
    ok = srv.run([quick], 60, deadlines={quick: 5.0})
    assert ok["timed_out"] is False and ok["hung"] is None
    assert ok["outcomes"] == {quick: "passed"}
    # tests without a deadline only have the run's budget
    bounded = srv.run([hangs], 2, deadlines={quick: 0.01})
    assert bounded["timed_out"] is True and bounded["hung"] is None

    # a CPU deadline ends a busy loop long before its wall deadline; a test that waits
    # rather than computes uses no CPU and is left alone by one
    busy = srv.run([hangs], 60, deadlines={hangs: 30.0}, cpu_deadlines={hangs: 0.5})
    assert busy["timed_out"] is True and busy["hung"] == hangs and busy["wall_s"] < 15
    waits = srv.run([quick], 60, deadlines={quick: 30.0}, cpu_deadlines={quick: 0.1})
    assert waits["timed_out"] is False and waits["outcomes"] == {quick: "passed"}


LIB = textwrap.dedent('''\
    import time

    FACTOR = 2


    def double(x):
        return x * FACTOR


    def half(x):
        return x / 2


    def table():
        return [1, 2, 3]


    ROWS = table()
    ''')
TESTS = textwrap.dedent('''\
    import pytest

    import lib


    def test_double():
        assert lib.double(2) == 4


    def test_half():
        assert lib.half(4) == 2


    @pytest.mark.parametrize("row", lib.ROWS)
    def test_rows(row):
        assert row > 0
    ''')


def _no_addresses(messages: dict[str, str]) -> dict[str, str]:
    return {k: re.sub(r"0x[0-9a-f]+", "0x?", v) for k, v in messages.items()}


def _image_tree(root: Path) -> None:
    (root / "lib.py").write_text(LIB)
    (root / "test_lib.py").write_text(TESTS)


def test_the_head_image_serves_golden_and_body_edited_trees_as_fresh_runs_would(
        server: tuple[Server, Path]) -> None:
    srv, root = server
    _image_tree(root)
    ready = srv.start_image(60)
    assert ready["ready"] is True and ready["items"] == 5
    ids = ["test_lib.py::test_double", "test_lib.py::test_half"]
    golden = srv.in_image(ids, 30)
    assert golden["outcomes"] == dict.fromkeys(ids, "passed") and golden["exit_code"] == 0
    assert golden["hotpatched"] == 0

    # a body edit: served by swapping the function's code in, with the same outcome and
    # the same failure report as a fresh pytest process on the edited tree
    (root / "lib.py").write_text(LIB.replace("return x * FACTOR", "return x + FACTOR + 1"))
    hot = srv.in_image(ids, 30, hotpatch=["lib.py"])
    fresh = srv.run(ids, 30)
    assert hot["hotpatched"] == 1 and hot["exit_code"] == fresh["exit_code"] == 1
    assert hot["outcomes"] == fresh["outcomes"] == {ids[0]: "failed", ids[1]: "passed"}
    assert _no_addresses(hot["messages"]) == _no_addresses(fresh["messages"])
    assert "assert 5 == 4" in hot["messages"][ids[0]]

    # the image itself is untouched: the next fork runs head's code again
    (root / "lib.py").write_text(LIB)
    assert srv.in_image(ids, 30)["outcomes"] == golden["outcomes"]

    # what the image cannot serve exactly is refused, and nothing ran
    for old, new, why in [("FACTOR = 2", "FACTOR = 3", "module- or class-level"),
                          ("return [1, 2, 3]", "return [1, 2, 0]", "ran before the fork")]:
        (root / "lib.py").write_text(LIB.replace(old, new))
        refused = srv.in_image(ids, 30, hotpatch=["lib.py"])
        assert why in refused["unservable"]
        assert refused["outcomes"] == {} and refused["exit_code"] == -1
    missing = srv.in_image(["test_lib.py::test_gone"], 30)
    assert "not collected at head" in missing["unservable"]


def test_the_head_image_runs_the_whole_suite_as_a_fresh_run_would(
        server: tuple[Server, Path]) -> None:
    srv, root = server
    _image_tree(root)
    assert srv.start_image(60)["ready"] is True
    whole = srv.in_image([], 30, whole=True)
    fresh = srv.run([], 30)
    assert whole["exit_code"] == fresh["exit_code"] == 0 and whole["hotpatched"] == 0
    # every test, in the order a fresh session runs them
    assert list(whole["outcomes"].items()) == list(fresh["outcomes"].items())
    assert len(whole["outcomes"]) == 5

    # an edited function body swapped in: the whole suite as a fresh run of the edited tree
    (root / "lib.py").write_text(LIB.replace("return x * FACTOR", "return x + FACTOR + 1"))
    edited = srv.in_image([], 30, whole=True, hotpatch=["lib.py"])
    fresh = srv.run([], 30)
    assert edited["hotpatched"] == 1 and edited["exit_code"] == fresh["exit_code"] == 1
    assert list(edited["outcomes"].items()) == list(fresh["outcomes"].items())
    assert "failed" in edited["outcomes"].values()
    # what cannot be swapped exactly is refused as in any run; no mixing with node ids
    (root / "lib.py").write_text(LIB.replace("FACTOR = 2", "FACTOR = 3"))
    refused = srv.in_image([], 30, whole=True, hotpatch=["lib.py"])
    assert "module- or class-level" in refused["unservable"] and refused["outcomes"] == {}
    refused = srv.in_image(["test_lib.py::test_double"], 30, whole=True)
    assert "whole suite" in refused["unservable"] and refused["outcomes"] == {}


def test_a_hang_in_the_image_ends_at_its_deadline_and_the_image_serves_on(
        server: tuple[Server, Path]) -> None:
    srv, root = server
    _image_tree(root)
    assert srv.start_image(60)["ready"] is True
    (root / "lib.py").write_text(LIB.replace("return x / 2", "while True:\n        pass"))
    half = "test_lib.py::test_half"
    reply = srv.in_image([half], 60, hotpatch=["lib.py"],
                    deadlines={half: 1.0})
    assert reply["timed_out"] is True and reply["hung"] == half and reply["wall_s"] < 20
    (root / "lib.py").write_text(LIB)
    assert srv.in_image([half], 30)["outcomes"] == {half: "passed"}


SHAPES = textwrap.dedent('''\
    class Shape:
        def __init__(self, side):
            self.side = side

        def area(self):
            return self.side * self.side

        def check(self):
            if self.side < 0:
                raise ValueError("negative side")
            return True


    def scale(shape, k):
        if k == 0:
            raise ZeroDivisionError("no scale")
        return Shape(shape.side * k)
    ''')
SHAPE_TESTS = textwrap.dedent('''\
    from shapes import Shape, scale


    def test_area():
        assert Shape(3).area() == 9


    def test_scale():
        assert scale(Shape(2), 0).side == 0
    ''')


def test_reports_through_an_edited_module_are_a_fresh_runs(
        server: tuple[Server, Path]) -> None:
    """Tracebacks that pass through the edited module (in the edited method, and in a function
    the edit moved down) quote the edited file's lines, as a fresh process would."""
    srv, root = server
    (root / "shapes.py").write_text(SHAPES)
    (root / "test_shapes.py").write_text(SHAPE_TESTS)
    assert srv.start_image(60)["ready"] is True
    ids = ["test_shapes.py::test_area", "test_shapes.py::test_scale"]
    edited = SHAPES.replace("        return self.side * self.side\n",
                            "        side = self.side\n        side = -side\n"
                            "        raise ArithmeticError(f'area of {side}')\n")
    (root / "shapes.py").write_text(edited)
    hot = srv.in_image(ids, 30, hotpatch=["shapes.py"])
    fresh = srv.run(ids, 30)
    assert hot["hotpatched"] >= 2  # the edited method, and the function it moved
    assert hot["outcomes"] == fresh["outcomes"] == dict.fromkeys(ids, "failed")
    assert _no_addresses(hot["messages"]) == _no_addresses(fresh["messages"])
    lines = edited.splitlines()
    raised = lines.index("        raise ArithmeticError(f'area of {side}')") + 1
    moved = lines.index('        raise ZeroDivisionError("no scale")') + 1
    assert f"shapes.py:{raised}: in area" in hot["messages"][ids[0]]
    assert f"shapes.py:{moved}: in scale" in hot["messages"][ids[1]]


@pytest.mark.slow
def test_outcomes_only_runs_take_a_module_skipped_at_import_as_a_fresh_run_does(
        server: tuple[Server, Path]) -> None:
    # jsonpickle 3.3.0: tests/numpy_test.py skips itself at import when numpy does not load;
    # every outcomes-only run of its whole suite (the broken tree's repeats, golden runs)
    # ended in pytest's INTERNALERROR, exit 3, and 38 of 56 candidates were dropped
    srv, root = server
    (root / "lib.py").write_text(LIB)
    (root / "test_lib.py").write_text(TESTS.replace("== 4", "== 5"))
    (root / "test_optional.py").write_text(
        "import pytest\n\npytest.importorskip('swemill_absent_module')\n\n\n"
        "def test_never():\n    pass\n")
    (root / "test_unit_skip.py").write_text(
        "import unittest\n\nraise unittest.SkipTest('not here')\n")
    fresh = srv.run([], 30)
    assert fresh["exit_code"] == 1, fresh["log_tail"]
    for run in (srv.run([], 30, terse=True), srv.run([], 30, terse=True, cold=True)):
        assert "INTERNALERROR" not in run["log_tail"], run["log_tail"]
        assert run["exit_code"] == 1 and run["outcomes"] == fresh["outcomes"]
    assert srv.start_image(60)["ready"] is True
    whole = srv.in_image([], 30, whole=True, terse=True)
    assert whole["exit_code"] == 1 and whole["outcomes"] == fresh["outcomes"], whole["log_tail"]
