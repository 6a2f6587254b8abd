"""Covered lines map to the innermost function whose body holds them; def lines never count."""

from __future__ import annotations

from pathlib import Path

from swemill.suite.covermap import build_coverage_map, function_spans

SOURCE = '''\
import functools

LIMIT = 3


def outer(x):
    def inner(y):
        return y + 1
    return inner(x) * 2


class Shape:
    sides = 0

    @functools.cache
    def area(self):
        return 0

    class Nested:
        def deep(self):
            return 1


async def fetch():
    return 1
'''


def test_spans_name_nested_functions_and_methods() -> None:
    spans = {q: (a, b) for a, b, q in function_spans(SOURCE)}
    assert set(spans) == {"outer", "outer.inner", "Shape.area", "Shape.Nested.deep", "fetch"}
    assert spans["outer"] == (7, 9)
    assert spans["outer.inner"] == (8, 8)
    assert spans["Shape.area"] == (17, 17)


def test_unparseable_source_has_no_spans() -> None:
    assert function_spans("def broken(:\n") == []


def test_map_uses_innermost_function_and_ignores_def_and_module_lines(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE)
    per_file = {"pkg/mod.py": {
        "tests/test_a.py::test_outer": [6, 7, 8, 9],  # 6 is the def line
        "tests/test_a.py::test_area": [3, 16, 17],    # 3 is module level, 16 the def line
        "tests/test_b.py::test_inner": [8],
    }, "gone.py": {"t::x": [1]}}
    cmap = build_coverage_map(per_file, tmp_path)
    assert cmap == {
        "pkg/mod.py::Shape.area": ["tests/test_a.py::test_area"],
        "pkg/mod.py::outer": ["tests/test_a.py::test_outer"],
        "pkg/mod.py::outer.inner": ["tests/test_a.py::test_outer", "tests/test_b.py::test_inner"],
    }
