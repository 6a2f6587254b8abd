"""A run's CPU budget ends a test that loops forever at that budget, whatever the wall budget.

Regression class: near-miss runs have no per-test deadlines, only a whole-run budget whose
wall clock grows with the machine's load; parsy 2.1's near-miss variant that loops forever
burned that whole wall budget in CPU (6.0 of the candidate run's 19.7 CPU s at load 7). A run
given ``cpu_timeout`` ends, timed out, once its test process has used that much CPU, in a fork
of the server and in a fork of the head image alike; a run under its CPU budget is untouched.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.validate.inside_server import Server

TESTS = ("import os\n\n\ndef test_quick():\n    assert True\n\n\n"
         "def test_loops():\n    if os.path.exists('loop'):\n        while True:\n"
         "            pass\n")


def test_a_cpu_budget_ends_a_looping_run_long_before_its_wall_budget(tmp_path: Path) -> None:
    (tmp_path / "test_loop.py").write_text(TESTS)
    ids = ["test_loop.py::test_quick", "test_loop.py::test_loops"]
    server = Server(tmp_path)
    try:
        assert server.start_image(60)["ready"]
        quick = server.run(ids, 60, terse=True, cpu_timeout=5.0)
        (tmp_path / "loop").write_text("")
        started = time.monotonic()
        forked = server.run(ids, 60, terse=True, cpu_timeout=0.5)
        imaged = server.in_image(ids, 60, terse=True, cpu_timeout=0.5)
        took = time.monotonic() - started
    finally:
        server.close()
    assert (quick["exit_code"], quick["timed_out"]) == (0, False)
    assert quick["outcomes"] == dict.fromkeys(ids, "passed")
    for run in (forked, imaged):
        assert run["timed_out"] and run["exit_code"] == -9 and run["hung"] is None
        assert 0.5 <= run["cpu_s"] < 5.0
    assert took < 30  # both ended at their CPU budget, not at the 60 s wall budget
