"""conftest hooks written for pytest's ``py.path`` arguments, which pytest 9 removed.

Until pytest 9, collection and report hooks also received their path as a ``py.path``
(``path``, ``startdir``). A ``conftest.py`` whose hook names one of those arguments makes
pytest 9 refuse to start (pluggy: "Argument(s) {'path'} are declared in the hookimpl but can
not be found in the hookspec"), so not one test of the suite runs. Such a suite is tested
with ``pytest<9``: :func:`legacy_hook_pins` finds those hooks by reading (never importing)
the repository's ``conftest.py`` files.
"""

from __future__ import annotations

import ast
from pathlib import Path

__all__ = ["LEGACY_ARGS", "legacy_hook_pins"]

LEGACY_ARGS = {
    "pytest_collect_file": {"path"},
    "pytest_pycollect_makemodule": {"path"},
    "pytest_ignore_collect": {"path"},
    "pytest_report_header": {"startdir"},
    "pytest_report_collectionfinish": {"startdir"},
}
"""Hook -> the ``py.path`` arguments pytest 9 no longer passes it."""
PIN = "pytest<9"
_SKIP = {"build", "dist", "node_modules", "site-packages"}


def legacy_hook_pins(root: Path) -> tuple[list[str], list[str]]:
    """``(["pytest<9"], [evidence])`` when a ``conftest.py`` under ``root`` defines a hook
    with a removed argument, else ``([], [])``. Evidence names the file, hook and argument."""
    for path in sorted(root.rglob("conftest.py")):
        rel = path.relative_to(root)
        if any(p.startswith(".") or p in _SKIP for p in rel.parts[:-1]):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    node.name in LEGACY_ARGS:
                args = node.args
                names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
                old = sorted(names & LEGACY_ARGS[node.name])
                if old:
                    return [PIN], [f"{rel}: {node.name}({', '.join(old)}) takes a py.path "
                                   f"argument pytest 9 removed: {PIN}"]
    return [], []
