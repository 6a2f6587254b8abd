"""The inside package runs where swemill is not installed: it imports only the standard
library (and pytest, which the repository's environment always has), its modules only one
another, relatively; and its protocol refuses what is not a record of its version."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from swemill.validate.inside import protocol as wire
from swemill.validate.warm import INSIDE_DIR

ALLOWED = set(sys.stdlib_module_names) | {"pytest", "_pytest", "__future__"}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


def test_the_inside_package_imports_nothing_but_the_standard_library_and_pytest() -> None:
    modules = sorted(INSIDE_DIR.glob("*.py"))
    assert {m.stem for m in modules} >= {"protocol", "serve_loop", "forkrun", "codecache",
                                         "report_cache", "image", "hotpatch", "__main__"}
    for module in modules:
        bad = [n for n in _imports(module) if n.split(".")[0] not in ALLOWED]
        assert not bad, f"{module.name} imports {bad}: the sandbox has no swemill"
        assert len(module.read_text().splitlines()) < 400, module.name


def test_records_round_trip_and_anything_else_is_refused() -> None:
    request = wire.RunInImage(7, ["t.py::a"], ["lib.py"], 3.0, {"t.py::a": 1.0})
    assert wire.decode(wire.encode(request)) == request
    line = json.loads(wire.encode(request))
    assert line["op"] == "run_in_image" and line["v"] == wire.VERSION
    for bad, why in [({**line, "v": wire.VERSION + 1}, "protocol version"),
                     ({**line, "op": "image"}, "unknown op"),
                     ({**line, "image": True}, "bad run_in_image record"),
                     ([1, 2], "not a JSON object")]:
        with pytest.raises(wire.ProtocolError, match=why):
            wire.decode(json.dumps(bad))


def test_flags_name_each_optimisation_and_refuse_unknown_names() -> None:
    assert wire.Flags().off() == []
    assert wire.Flags.all_off().off() == wire.Flags.names()
    assert wire.Flags.without(["hotpatch"]).off() == ["hotpatch"]
    with pytest.raises(wire.ProtocolError, match="unknown flag 'turbo'"):
        wire.Flags.without(["turbo"])
