"""The zoo's by-hand re-validation runs pytest as in the activated venv (no swemill code)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

ZOO = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_zoo.py"


def _bench_zoo():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_zoo", ZOO)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_zoo"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_venv_console_scripts_are_on_path_by_hand() -> None:
    # glom 23.5.0's test_main runs its `glom` console script in a subprocess: by hand it
    # failed (FileNotFoundError) and three true glom tasks were reported false
    bz = _bench_zoo()
    # run as root, the by-hand pytest drops to nobody: pytest's own tmp_path is private
    tmp_path = Path(tempfile.mkdtemp(prefix="zoo-by-hand-"))
    os.chmod(tmp_path, 0o755)
    try:
        _check(bz, tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _check(bz, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    tool = venv_bin / "zoo-demo-cli"
    tool.write_text("#!/bin/sh\necho from-the-venv\n")
    tool.chmod(0o755)
    work = tmp_path / "w"
    work.mkdir()
    (work / "test_cli.py").write_text(
        "import subprocess\n\n"
        "def test_cli():\n"
        "    assert subprocess.check_output(['zoo-demo-cli']) == b'from-the-venv\\n'\n")
    out = bz.pytest_by_hand(venv_bin / "python", work, ["."], ["test_cli.py::test_cli"], 120)
    assert out == {"test_cli.py::test_cli": "passed"}


def test_a_parametrised_id_holding_the_message_separator_is_read_whole() -> None:
    # sqlparse 0.5.1: three true tasks were reported false, a P2P test "missing"
    bz = _bench_zoo()
    tid = "tests/test_g.py::test_cmp[c < now - interval '1 day'-Token]"
    other = "tests/test_g.py::test_x[a - b]"
    out = bz.summary_outcomes(f"PASSED {tid}\nFAILED {other} - assert 1 - 2 == 0\n",
                              [tid, other])
    assert out == {tid: "passed", other: "failed"}
